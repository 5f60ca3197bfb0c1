//! The fixed-lease check: one background task per client that, after the client
//! reconnects to Redis, asks whether each fixed-lease lock it holds is still there, and
//! reports those that are not.
//!
//! The watchdog finds a lock that a restarted or failed-over Redis forgot at its next
//! renewal (a reconnection starts one at once). A fixed-lease lock has no renewal: without
//! this check its holder would believe in it until the lease ran out, while another client
//! may already hold it. Between reconnections nothing is sent.
//!
//! On a Redis Cluster the connection is never replaced, so no reconnection says that a
//! replica was promoted: while the client holds any lock, this task reads the cluster's
//! epoch every [`EPOCH_POLL`] instead ([`cluster_epoch`](super::cluster_epoch)), and when it rose,
//! tells the watchdog (through the same reconnection signal) and checks the fixed-lease
//! holds. A check that fails on a cluster (the topology is still settling) is tried again
//! after [`RETRY_AFTER_FAILURE`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::config::settings::Settings;
use crate::holds::Holds;
use crate::protocol::scripts;
use crate::protocol::slot::batches;
use crate::services::cluster_epoch::{EpochWatch, EPOCH_POLL};
use crate::services::periodic::{Periodic, Rounds};
use crate::transport::connections::Connections;

/// How long the task sleeps when no reconnection wakes it; it then ends if no fixed-lease
/// hold is left, and otherwise sleeps again.
const IDLE: Duration = Duration::from_secs(3600);

/// On a cluster, after a check that could not reach every hold's master, the next try.
const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(200);

/// The checks, run by a [`Periodic`] task.
pub(crate) type LeaseCheck = Periodic<Checks>;

/// What one client's lease check looks at, and what it found last.
pub(crate) struct Checks {
    holds: Arc<Holds>,
    connections: Arc<Connections>,
    batch_size: usize,
    /// Set for a cluster client: the task then also watches the cluster's epoch.
    epoch: Option<EpochWatch>,
    /// Set when the last check could not reach every hold's master: the next round checks
    /// again, whatever the epoch says.
    unfinished: AtomicBool,
}

impl LeaseCheck {
    /// The check of the holds in `holds`, on `runtime` (started by
    /// [`ensure_running`](Periodic::ensure_running) after a fixed-lease hold is added, and on
    /// a cluster after any hold).
    pub(crate) fn checking(
        holds: &Arc<Holds>,
        connections: &Arc<Connections>,
        settings: &Settings,
        runtime: &tokio::runtime::Handle,
    ) -> Self {
        let checks = Checks {
            holds: holds.clone(),
            epoch: connections.is_cluster().then(EpochWatch::default),
            unfinished: AtomicBool::new(false),
            connections: connections.clone(),
            batch_size: settings.watchdog_batch_size,
        };
        // The first read of the epoch is the baseline: at once, so that a failover right
        // after the first lock was taken is not taken for the baseline.
        let first_pause = checks.epoch.as_ref().map_or(IDLE, |_| Duration::ZERO);
        let reconnected = connections.reconnects().listen();
        Periodic::new(checks, first_pause, Some(reconnected), runtime)
    }
}

impl Checks {
    /// The pause between rounds when nothing went wrong.
    fn pause(&self) -> Duration {
        self.epoch.as_ref().map_or(IDLE, |_| EPOCH_POLL)
    }
}

impl Rounds for Checks {
    fn has_work(&self) -> bool {
        if self.epoch.is_some() {
            // A watchdog hold lost to a failover is reported sooner when the epoch is read.
            self.holds.len() > 0
        } else {
            self.holds.has_fixed_lease_holds()
        }
    }

    async fn round(&self, woken: bool) -> Duration {
        let unfinished = self.unfinished.swap(false, Ordering::Relaxed);
        if let (Some(epoch), false, false) = (&self.epoch, woken, unfinished) {
            let read = |conn| async move { epoch.changed(&conn).await };
            match self.connections.once(read).await {
                Ok(true) => {
                    tracing::debug!("the cluster changed its topology: checking held locks");
                    // The watchdog renews, and so checks, its holds at once; this task's
                    // own permit brings it back at once, woken, to check the fixed-lease
                    // holds.
                    self.connections.reconnects().tell();
                }
                Ok(false) => {}
                Err(e) => tracing::debug!(error = %e, "reading the cluster's epoch failed"),
            }
            return self.pause();
        }
        if check_all(self).await || self.epoch.is_none() {
            self.pause()
        } else {
            self.unfinished.store(true, Ordering::Relaxed);
            RETRY_AFTER_FAILURE
        }
    }
}

/// Checks every fixed-lease hold, a batch per call; a hold Redis no longer has is lost.
/// Returns false if a batch could not be checked.
async fn check_all(checks: &Checks) -> bool {
    let holds = checks.holds.fixed_lease_holds();
    if holds.is_empty() {
        return true;
    }
    // On a cluster, one call per hash slot: a script call may name one slot's keys only.
    let per_slot = checks.connections.is_cluster();
    for batch in batches(holds, per_slot, checks.batch_size, |hold| {
        hold.id.key.as_bytes()
    }) {
        let pairs = batch.iter().map(|hold| (&*hold.id.key, &*hold.id.owner));
        let still_held = |mut conn| async move { scripts::still_held(&mut conn, pairs).await };
        match checks.connections.once(still_held).await {
            Ok(held) => {
                for (hold, held) in batch.iter().zip(held) {
                    if !held {
                        hold.found_gone();
                    }
                }
            }
            Err(e) => {
                // The next reconnection tries again; a lease that runs out meanwhile is
                // lost by its own deadline.
                tracing::debug!(error = %e, locks = batch.len(), "fixed-lease check failed");
                return false;
            }
        }
    }
    true
}
