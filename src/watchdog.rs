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
use crate::hold::{Applied, Due, Hold, Holds};
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
/// Redis (or, with replica sync on, no replica acknowledged the round).
async fn renew_all(renewals: &Renewals) -> bool {
    let now = Instant::now();
    let mut holds = renewals.holds.to_renew(now);
    if holds.is_empty() {
        return true;
    }
    // Holds near the end of their maximum hold time get shorter leases, one per key: they
    // go last, so that the batches before them carry one lease for all.
    // Most rounds have none: then nothing is sorted.
    if holds.iter().any(|due| due.applied.capped) {
        holds.sort_by_key(|due| due.applied.capped);
    }
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
    let mut conn = (*pooled).clone();
    let (sent, size, all) = (conn.clone(), renewals.batch_size, &holds);
    // Batches by start index: a stream over `chunks` trips the compiler's higher-ranked
    // lifetime check on this `Send` future.
    let answered: Vec<Option<Renewed<'_>>> = stream::iter((0..holds.len()).step_by(size))
        .map(move |start| {
            let batch = &all[start..all.len().min(start + size)];
            renew_batch(sent.clone(), lease_ms, batch)
        })
        .buffer_unordered(BATCHES_IN_FLIGHT)
        .collect()
        .await;
    // One WAIT for the whole round: it covers every write made before it on this
    // connection. A renewal no replica has would be forgotten by a failover, so it must not
    // push the validity forward; a lock found gone is gone either way.
    let replicated = match renewals.replica_sync.as_deref() {
        Some(sync) => match sync.wait(&mut conn).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, locks = holds.len(), "lock renewals not replicated");
                false
            }
        },
        None => true,
    };
    let mut all_answered = true;
    for renewed in answered {
        match renewed {
            Some(renewed) => renewed.settle(replicated),
            None => all_answered = false,
        }
    }
    all_answered && replicated
}

/// What one renewal batch found: for each hold, whether its owner still held it.
struct Renewed<'a> {
    holds: Vec<(&'a Hold, Applied)>,
    found: Vec<bool>,
    started: Instant,
}

impl Renewed<'_> {
    /// Applies the answers: renewed holds are valid for longer (unless the renewal does not
    /// count, not being replicated), and holds found gone are lost.
    fn settle(self, counts: bool) {
        for ((hold, applied), renewed) in self.holds.iter().zip(self.found) {
            if renewed && !counts {
                continue;
            }
            settle(hold, renewed, self.started, *applied);
        }
    }
}

/// Sends one batch; `None` when it could not reach Redis.
async fn renew_batch(
    mut conn: redis::aio::MultiplexedConnection,
    lease_ms: u64,
    batch: &[Due],
) -> Option<Renewed<'_>> {
    let started = Instant::now();
    // Borrowed, not cloned: at 100,000 holds, a reference count touched is a cache miss.
    let holds: Vec<(&Hold, Applied)> = batch
        .iter()
        .filter_map(|due| {
            // A lease bounded by a maximum hold time is reckoned from when the batch goes
            // out, so that none reaches past that time however long the batch queued.
            let applied = if due.bounded {
                due.hold.lease_at(started)
            } else {
                due.applied
            };
            if applied.is_spent() {
                // Nothing left of the maximum hold time: the last lease runs out.
                due.hold.max_hold_reached();
                return None;
            }
            Some((&*due.hold, applied))
        })
        .collect();
    if holds.is_empty() {
        return Some(Renewed {
            holds,
            found: Vec::new(),
            started,
        });
    }
    let keys = holds
        .iter()
        .map(|(hold, applied)| (&*hold.key, &*hold.owner, applied.ms));
    match scripts::renew(&mut conn, lease_ms, keys).await {
        Ok(found) => Some(Renewed {
            holds,
            found,
            started,
        }),
        Err(e) => {
            tracing::warn!(error = %e, locks = holds.len(), "lock renewal failed");
            None
        }
    }
}

fn settle(hold: &Hold, renewed: bool, started: Instant, applied: Applied) {
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
