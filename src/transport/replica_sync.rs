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

/// A reading of `connected_slaves` (of one master, or of every master by node address),
/// and when it was taken.
type Reading<T> = (T, tokio::time::Instant);

/// The reading, unless it is older than [`REPLICAS_READ_EVERY`] or a `fresh` one is asked
/// for.
fn recent<T: Clone>(reading: Option<&Reading<T>>, fresh: bool) -> Option<T> {
    let (connected, _) = reading.filter(|(_, at)| !fresh && at.elapsed() < REPLICAS_READ_EVERY)?;
    Some(connected.clone())
}

/// What `WAIT` waits for, and the last readings of the masters' connected replicas.
#[derive(Debug)]
pub(crate) struct ReplicaSync {
    replicas: usize,
    timeout: Duration,
    /// By where the write was made: on a cluster, the master of a slot; `None`, the
    /// connection's one Redis.
    readings: Mutex<HashMap<Option<u16>, Reading<usize>>>,
    /// Every master of a cluster, read at once, by node address (as redis-rs names it).
    every_master: Mutex<Option<Reading<HashMap<String, usize>>>>,
}

impl ReplicaSync {
    pub(crate) fn new(replicas: usize, timeout: Duration) -> Self {
        ReplicaSync {
            replicas,
            timeout,
            readings: Mutex::new(HashMap::new()),
            every_master: Mutex::new(None),
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
        let waited = self.wait_on(conn, slot).await;
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
        let waited = if conn.is_cluster() {
            self.wait_on_every_master(conn).await
        } else {
            self.wait_on(conn, None).await.map(|()| Vec::new())
        };
        let failed = match waited {
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

    /// `WAIT` on one Redis: the master of `slot` on a cluster.
    async fn wait_on(&self, conn: &mut Conn, slot: Option<u16>) -> Result<()> {
        let connected = self.connected_replicas(conn, slot, false).await?;
        if connected == 0 {
            return Ok(());
        }
        let wanted = self.replicas.min(connected);
        let acked: usize = query(conn, slot, self.wait_command(wanted)).await?;
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
        let connected = self.connected_replicas(conn, slot, true).await?;
        if connected == 0 {
            return Ok(());
        }
        tracing::warn!(connected, timeout = ?self.timeout, "no replica acknowledged a lock write");
        Err(Error::NotReplicated {
            connected,
            timeout: self.timeout,
        })
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

    /// The connected replicas of the master at `slot` (see [`ReplicaSync::wait_on`]): the
    /// last reading, or a new one when it is older than [`REPLICAS_READ_EVERY`] or `fresh`
    /// is asked for.
    async fn connected_replicas(
        &self,
        conn: &mut Conn,
        slot: Option<u16>,
        fresh: bool,
    ) -> Result<usize> {
        let recent = recent(poison::locked(&self.readings).get(&slot), fresh);
        if let Some(connected) = recent {
            return Ok(connected);
        }
        let info: String = query(conn, slot, info_replication()).await?;
        let connected = parse_connected_replicas(&info);
        poison::locked(&self.readings).insert(slot, (connected, tokio::time::Instant::now()));
        Ok(connected)
    }

    /// The connected replicas of every master of a cluster, by node address; read anew as
    /// [`connected_replicas`](Self::connected_replicas) is.
    async fn every_master(&self, conn: &mut Conn, fresh: bool) -> Result<HashMap<String, usize>> {
        let recent = recent(poison::locked(&self.every_master).as_ref(), fresh);
        if let Some(connected) = recent {
            return Ok(connected);
        }
        let replies = conn.on_every_master(info_replication()).await?;
        // A master that did not answer has no reading: its writes failed anyway.
        let connected: HashMap<String, usize> = replies
            .into_iter()
            .filter_map(|(node, reply)| {
                let info = redis::from_redis_value::<String>(reply).ok()?;
                Some((node, parse_connected_replicas(&info)))
            })
            .collect();
        *poison::locked(&self.every_master) =
            Some((connected.clone(), tokio::time::Instant::now()));
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

/// Runs `cmd` where the write was made: on a cluster, on the master of `slot`.
async fn query<T: redis::FromRedisValue>(
    conn: &mut Conn,
    slot: Option<u16>,
    cmd: Cmd,
) -> Result<T> {
    Ok(match slot {
        Some(slot) => conn.on_slot_master(cmd, slot).await?,
        None => cmd.query_async(conn).await?,
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
