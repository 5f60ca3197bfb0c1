//! The fixed-lease check: one background task per client that, after the client
//! reconnects to Redis, asks whether each fixed-lease lock it holds is still there, and
//! reports those that are not.
//!
//! The watchdog finds a lock that a restarted or failed-over Redis forgot at its next
//! renewal (a reconnection starts one at once). A fixed-lease lock has no renewal: without
//! this check its holder would believe in it until the lease ran out, while another client
//! may already hold it. Between reconnections nothing is sent.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::holds::Holds;
use crate::protocol::scripts;
use crate::protocol::slot::group_by_slot;
use crate::services::periodic::{Periodic, Rounds};
use crate::transport::connection::Connections;

/// How long the task sleeps when no reconnection wakes it; it then ends if no fixed-lease
/// hold is left, and otherwise sleeps again.
const IDLE: Duration = Duration::from_secs(3600);

pub(crate) struct LeaseCheck {
    task: Periodic<Checks>,
}

struct Checks {
    holds: Arc<Holds>,
    connections: Arc<Connections>,
    reconnected: Arc<Notify>,
    batch_size: usize,
}

impl LeaseCheck {
    pub(crate) fn new(
        holds: Arc<Holds>,
        connections: Arc<Connections>,
        batch_size: usize,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        let checks = Checks {
            holds,
            reconnected: connections.reconnects().listen(),
            connections,
            batch_size,
        };
        LeaseCheck {
            task: Periodic::new(checks, runtime),
        }
    }

    /// Makes sure the task runs; call after adding a fixed-lease hold.
    pub(crate) fn ensure_running(&self) {
        self.task.ensure_running();
    }
}

impl Rounds for Checks {
    fn first_pause(&self) -> Duration {
        IDLE
    }

    fn has_work(&self) -> bool {
        self.holds.has_fixed_lease_holds()
    }

    async fn round(&self) -> Duration {
        check_all(self).await;
        IDLE
    }

    fn cut_short(&self) -> Option<&Notify> {
        Some(&self.reconnected)
    }
}

/// Checks every fixed-lease hold, a batch per call; a hold Redis no longer has is lost.
async fn check_all(checks: &Checks) {
    let holds = checks.holds.fixed_lease_holds();
    if holds.is_empty() {
        return;
    }
    let mut conn = match checks.connections.shared().await {
        Ok(shared) => shared.conn,
        Err(e) => {
            // The next reconnection tries again; a lease that runs out meanwhile is lost
            // by its own deadline.
            tracing::debug!(error = %e, "fixed-lease check cannot reach Redis");
            return;
        }
    };
    // On a cluster, one call per hash slot: a script call may name one slot's keys only.
    let groups = if conn.is_cluster() {
        group_by_slot(holds, |hold| hold.key.as_bytes())
    } else {
        vec![holds]
    };
    for batch in groups
        .iter()
        .flat_map(|group| group.chunks(checks.batch_size))
    {
        let pairs = batch.iter().map(|hold| (&*hold.key, &*hold.owner));
        match scripts::still_held(&mut conn, pairs).await {
            Ok(held) => {
                for (hold, held) in batch.iter().zip(held) {
                    if !held {
                        hold.found_gone();
                    }
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, locks = batch.len(), "fixed-lease check failed");
                return;
            }
        }
    }
}
