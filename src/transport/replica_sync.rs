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

use crate::error::{Error, Result};
use crate::protocol::conn::Conn;
use crate::transport::slot_map::SlotMap;
use crate::util::metrics;
use crate::util::poison;

/// How long a reading of the number of connected replicas is trusted: `WAIT` for replicas
/// that are not there would block for the whole timeout on every write.
const REPLICAS_READ_EVERY: Duration = Duration::from_secs(1);

/// Where a write was made, and so where its `WAIT` and `INFO` go.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Site {
    /// The connection's one Redis.
    Connection,
    /// On a cluster, the master of this slot.
    Slot(u16),
    /// On a cluster, the master at this address (as redis-rs names it).
    Node(String),
    /// When every master of a cluster was last read.
    EveryMaster,
}

/// A reading of `connected_slaves`, and when it was taken.
#[derive(Debug, Clone, Copy)]
struct Reading {
    connected: usize,
    at: tokio::time::Instant,
}

/// What `WAIT` waits for, and the last readings of the masters' connected replicas.
#[derive(Debug)]
pub(crate) struct ReplicaSync {
    replicas: usize,
    timeout: Duration,
    readings: Mutex<HashMap<Site, Reading>>,
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
        let waited = match (conn.is_cluster(), slot) {
            (true, Some(slot)) => self.wait_on(conn, Site::Slot(slot)).await,
            _ => self.wait_on(conn, Site::Connection).await,
        };
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
        let replicated = self.wait_round_on(conn).await;
        metrics::replica_sync(match replicated {
            Replicated::All => "acknowledged",
            _ => "not_acknowledged",
        });
        replicated
    }

    async fn wait_round_on(&self, conn: &mut Conn) -> Replicated {
        if !conn.is_cluster() {
            return match self.wait_on(conn, Site::Connection).await {
                Ok(()) => Replicated::All,
                Err(e) => {
                    tracing::warn!(error = %e, "lock renewals not replicated");
                    Replicated::Nothing
                }
            };
        }
        let failed = match self.wait_on_every_master(conn).await {
            Ok(failed) if failed.is_empty() => return Replicated::All,
            Ok(failed) => failed,
            Err(e) => {
                tracing::warn!(error = %e, "lock renewals not replicated");
                return Replicated::Nothing;
            }
        };
        tracing::warn!(masters = ?failed, timeout = ?self.timeout, "no replica acknowledged lock renewals");
        match slots_of(conn, &failed).await {
            Ok(void) => Replicated::Except(void),
            Err(_) => Replicated::Nothing,
        }
    }

    /// `WAIT` on one Redis.
    async fn wait_on(&self, conn: &mut Conn, site: Site) -> Result<()> {
        let connected = self.connected_replicas(conn, &site, false).await?;
        if connected == 0 {
            return Ok(());
        }
        let wanted = self.replicas.min(connected);
        let acked: usize = query(conn, &site, self.wait_command(wanted)).await?;
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
        let connected = self.connected_replicas(conn, &site, true).await?;
        self.not_replicated(connected)
    }

    /// `WAIT` on every master of a cluster at once: each that has replicas must have one
    /// acknowledge; the addresses of those that did not. A master the round wrote nothing
    /// to answers at once.
    async fn wait_on_every_master(&self, conn: &mut Conn) -> Result<Vec<String>> {
        let mut connected = self.every_master(conn, false).await?;
        let wanted = self
            .replicas
            .min(connected.values().copied().max().unwrap_or(0));
        if wanted == 0 {
            return Ok(Vec::new());
        }
        let replies = conn.on_every_master(self.wait_command(wanted)).await?;
        let unacknowledged: Vec<String> = replies
            .into_iter()
            .filter(|(_, reply)| !matches!(reply, Value::Int(acked) if *acked > 0))
            .map(|(node, _)| node)
            .collect();
        if unacknowledged.is_empty() {
            return Ok(Vec::new());
        }
        // Failing only counts where replicas are still there.
        connected = self.every_master(conn, true).await?;
        Ok(unacknowledged
            .into_iter()
            .filter(|node| connected.get(node).copied().unwrap_or(0) > 0)
            .collect())
    }

    fn wait_command(&self, wanted: usize) -> Cmd {
        let mut wait = redis::cmd("WAIT");
        wait.arg(wanted)
            .arg(crate::util::time::millis(self.timeout));
        wait
    }

    fn not_replicated(&self, connected: usize) -> Result<()> {
        if connected == 0 {
            return Ok(());
        }
        tracing::warn!(connected, timeout = ?self.timeout, "no replica acknowledged a lock write");
        Err(Error::NotReplicated {
            connected,
            timeout: self.timeout,
        })
    }

    /// The connected replicas of the master at `site`: the last reading, or a new one when
    /// it is older than [`REPLICAS_READ_EVERY`] or `fresh` is asked for.
    async fn connected_replicas(&self, conn: &mut Conn, site: &Site, fresh: bool) -> Result<usize> {
        if let Some(reading) = self.reading(site, fresh) {
            return Ok(reading);
        }
        let info: String = query(conn, site, info_replication()).await?;
        let connected = parse_connected_replicas(&info);
        self.store(site.clone(), connected);
        Ok(connected)
    }

    /// The connected replicas of every master of a cluster, by node address; read anew as
    /// [`connected_replicas`](Self::connected_replicas) is.
    async fn every_master(&self, conn: &mut Conn, fresh: bool) -> Result<HashMap<String, usize>> {
        if self.reading(&Site::EveryMaster, fresh).is_some() {
            let readings = poison::locked(&self.readings);
            return Ok(readings
                .iter()
                .filter_map(|(site, reading)| match site {
                    Site::Node(node) => Some((node.clone(), reading.connected)),
                    _ => None,
                })
                .collect());
        }
        let replies = conn.on_every_master(info_replication()).await?;
        let mut connected = HashMap::with_capacity(replies.len());
        for (node, reply) in replies {
            // A master that did not answer has no reading: its writes failed anyway.
            if let Ok(info) = redis::from_redis_value::<String>(reply) {
                connected.insert(node, parse_connected_replicas(&info));
            }
        }
        let mut readings = poison::locked(&self.readings);
        readings.retain(|site, _| !matches!(site, Site::Node(_)));
        let at = tokio::time::Instant::now();
        for (node, &count) in &connected {
            readings.insert(
                Site::Node(node.clone()),
                Reading {
                    connected: count,
                    at,
                },
            );
        }
        readings.insert(Site::EveryMaster, Reading { connected: 0, at });
        Ok(connected)
    }

    fn reading(&self, site: &Site, fresh: bool) -> Option<usize> {
        if fresh {
            return None;
        }
        let readings = poison::locked(&self.readings);
        let reading = readings.get(site)?;
        (reading.at.elapsed() < REPLICAS_READ_EVERY).then_some(reading.connected)
    }

    fn store(&self, site: Site, connected: usize) {
        let at = tokio::time::Instant::now();
        poison::locked(&self.readings).insert(site, Reading { connected, at });
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
    let mut slots = redis::cmd("CLUSTER");
    slots.arg("SLOTS");
    let replies = conn.on_every_master(slots).await?;
    // Hosts as announced: redis-rs names a node by the address `CLUSTER SLOTS` gives.
    match replies
        .into_iter()
        .find_map(|(_, reply)| SlotMap::parse(&reply, "").ok())
    {
        Some(map) => Ok(map.ranges_of(nodes)),
        None => Err(Error::pool("no master answered CLUSTER SLOTS")),
    }
}

fn info_replication() -> Cmd {
    let mut info = redis::cmd("INFO");
    info.arg("replication");
    info
}

/// Runs `cmd` where the write of `site` was made.
async fn query<T: redis::FromRedisValue>(conn: &mut Conn, site: &Site, cmd: Cmd) -> Result<T> {
    Ok(match site {
        Site::Slot(slot) => conn.on_slot_master(cmd, *slot).await?,
        _ => cmd.query_async(conn).await?,
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
