//! The watchdog: one background task per client that renews every watchdog lock the client
//! holds, a batch of keys per script call, every third of the watchdog timeout.
//!
//! Unlike Redisson's watchdog it tells the holder: a renewal that finds the owner gone marks
//! the hold lost at once, and a hold whose renewals cannot reach Redis is lost when its
//! local validity deadline passes (see [`crate::hold`]).

use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{self, StreamExt};
use tokio::time::Instant;

use crate::connection::Connections;
use crate::error::LostReason;
use crate::hold::{Applied, Hold, Holds};
use crate::periodic::{Periodic, Rounds};
use crate::replica_sync::ReplicaSync;
use crate::scripts;

/// Renewal batches in flight at once on the watchdog's connection: enough to hide the round
/// trip when a client holds many thousands of locks, few enough not to flood Redis.
const BATCHES_IN_FLIGHT: usize = 4;

/// After a failed round, retry this soon rather than a whole interval later, so that a
/// short outage costs no lease.
const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(500);

pub(crate) struct Watchdog {
    task: Periodic<Renewals>,
}

struct Renewals {
    holds: Arc<Holds>,
    connections: Arc<Connections>,
    lease_ms: u64,
    batch_size: usize,
    /// Set when a renewal counts only once a replica has it.
    replica_sync: Option<Arc<ReplicaSync>>,
}

impl Watchdog {
    pub(crate) fn new(
        holds: Arc<Holds>,
        connections: Arc<Connections>,
        lease: Duration,
        batch_size: usize,
        replica_sync: Option<Arc<ReplicaSync>>,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        let renewals = Renewals {
            holds,
            connections,
            lease_ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX),
            batch_size,
            replica_sync,
        };
        Watchdog {
            task: Periodic::new(renewals, runtime),
        }
    }

    /// The lease of watchdog locks, in milliseconds.
    pub(crate) fn lease_ms(&self) -> u64 {
        self.task.rounds().lease_ms
    }

    /// Makes sure a renewal task runs; call after adding a watchdog hold. It runs on the
    /// client's runtime, whatever runtime the lock call came from.
    pub(crate) fn ensure_running(&self) {
        self.task.ensure_running();
    }

    /// Whether a renewal task is running (for tests and diagnostics).
    pub(crate) fn is_running(&self) -> bool {
        self.task.is_running()
    }
}

impl Renewals {
    fn interval(&self) -> Duration {
        Duration::from_millis(self.lease_ms / 3)
    }
}

impl Rounds for Renewals {
    fn first_pause(&self) -> Duration {
        self.interval()
    }

    fn has_work(&self) -> bool {
        let busy = self.holds.has_watchdog_holds();
        if !busy {
            tracing::debug!("watchdog idle: no watchdog lock held");
        }
        busy
    }

    async fn round(&self) -> Duration {
        if renew_all(self).await {
            self.interval()
        } else {
            self.interval().min(RETRY_AFTER_FAILURE)
        }
    }

    /// A reconnection starts a round at once: if Redis restarted without its data or failed
    /// over to a replica that lacked a lock, the renewal finds the owner's field gone and the
    /// holder is told now, not a third of a lease later.
    fn cut_short(&self) -> Option<&tokio::sync::Notify> {
        Some(self.connections.reconnected())
    }
}

/// One renewal round over every watchdog hold. Returns false if any batch failed to reach
/// Redis.
async fn renew_all(renewals: &Renewals) -> bool {
    let mut holds = renewals.holds.to_renew();
    if holds.is_empty() {
        return true;
    }
    // Holds near the end of their maximum hold time get shorter leases, one per key: they
    // go last, in batches of their own, so that the other batches stay one lease each.
    let now = Instant::now();
    holds.sort_by_cached_key(|hold| hold.lease_at(now).capped);
    holds.iter().for_each(|hold| hold.renewal_sent());
    // A pooled connection of its own, so that large batches do not queue in front of lock
    // calls on the shared one; deadpool health-checks it on each checkout.
    let pooled = match renewals.connections.pooled().await {
        Ok(conn) => conn,
        Err(e) => {
            tracing::warn!(error = %e, locks = holds.len(), "watchdog cannot reach Redis");
            return false;
        }
    };
    let lease_ms = renewals.lease_ms;
    let conn = (*pooled).clone();
    let batches: Vec<Vec<Arc<Hold>>> = holds
        .chunks(renewals.batch_size)
        .map(<[_]>::to_vec)
        .collect();
    let sync = renewals.replica_sync.as_deref();
    stream::iter(batches)
        .map(move |batch| renew_batch(conn.clone(), lease_ms, batch, sync))
        .buffer_unordered(BATCHES_IN_FLIGHT)
        .fold(true, |all, ok| async move { all && ok })
        .await
}

async fn renew_batch(
    mut conn: redis::aio::MultiplexedConnection,
    lease_ms: u64,
    batch: Vec<Arc<Hold>>,
    sync: Option<&ReplicaSync>,
) -> bool {
    let started = Instant::now();
    // Leases are reckoned from when the batch goes out, so that none reaches past a
    // maximum hold time however long the batch queued.
    let (batch, leases): (Vec<Arc<Hold>>, Vec<Applied>) = batch
        .into_iter()
        .filter_map(|hold| {
            let applied = hold.lease_at(started);
            if applied.is_spent() {
                // Nothing left of the maximum hold time: the last lease runs out.
                hold.max_hold_reached();
                return None;
            }
            Some((hold, applied))
        })
        .unzip();
    if batch.is_empty() {
        return true;
    }
    let keys = batch
        .iter()
        .zip(&leases)
        .map(|(hold, applied)| (&*hold.key, &*hold.owner, applied.ms));
    match scripts::renew(&mut conn, lease_ms, keys).await {
        Ok(renewed) => {
            // A renewal no replica has would be forgotten by a failover: it must not push
            // the validity forward. A lock found gone is gone either way.
            let replicated = match sync {
                Some(sync) => match sync.wait(&mut conn).await {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(error = %e, locks = batch.len(), "lock renewal not replicated");
                        false
                    }
                },
                None => true,
            };
            for ((hold, applied), renewed) in batch.iter().zip(leases).zip(renewed) {
                if renewed && !replicated {
                    continue;
                }
                settle(hold, renewed, started, applied);
            }
            replicated
        }
        Err(e) => {
            tracing::warn!(error = %e, locks = batch.len(), "lock renewal failed");
            false
        }
    }
}

fn settle(hold: &Arc<Hold>, renewed: bool, started: Instant, applied: Applied) {
    if renewed {
        hold.renewed(started, applied);
    } else if !hold.is_released() {
        // The owner's field is gone. If the lease had run out locally too, it expired;
        // otherwise somebody removed it.
        let reason = if Instant::now() >= hold.valid_until() {
            LostReason::Expired
        } else {
            LostReason::Released
        };
        hold.mark_lost(reason);
    }
}
