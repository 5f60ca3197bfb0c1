//! The watchdog: one background task per client that renews every watchdog lock the client
//! holds, a batch of keys per script call, every third of the watchdog timeout.
//!
//! Holds are renewed by the script of their kind (see [`Renewal`]): a batch of one call
//! holds one kind only, as Redisson's `LockTask` and `ReadLockTask` renew apart.
//!
//! Unlike Redisson's watchdog it tells the holder: a renewal that finds the owner gone marks
//! the hold lost at once, and a hold whose renewals cannot reach Redis is lost when its
//! local validity deadline passes (see [`crate::holds`]).

use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{self, Stream, StreamExt};
use tokio::time::Instant;
use tracing::Instrument;

use crate::config::settings::Settings;
use crate::holds::{Applied, Hold, Holds, Renewal};
use crate::protocol::conn::Conn;
use crate::protocol::key_slot;
use crate::protocol::kinds::read_write;
use crate::protocol::scripts;
use crate::protocol::slot::batches;
use crate::services::periodic::{Periodic, Rounds};
use crate::transport::connections::Connections;
use crate::transport::replica_sync::{ReplicaSync, Replicated};
use crate::util::metrics;

/// Renewal batches in flight at once on the watchdog's connection: enough to hide the round
/// trip when a client holds many thousands of locks, few enough not to flood Redis.
const BATCHES_IN_FLIGHT: usize = 4;

/// On a cluster, a round's holds are sent one call per hash slot (a script call may name
/// one slot's keys only); this many of the round's calls are in flight at once. With
/// 10,000 locks over all 16,384 slots a round is some 7,500 calls, so they must overlap
/// for the round to stay well inside a third of the lease.
const SLOT_CALLS_IN_FLIGHT: usize = 256;

/// After a failed round, retry this soon rather than a whole interval later, so that a
/// short outage costs no lease.
const RETRY_AFTER_FAILURE: Duration = Duration::from_millis(500);

/// The renewal rounds, run by a [`Periodic`] task.
pub(crate) type Watchdog = Periodic<Renewals>;

/// What one client's watchdog renews, and how.
pub(crate) struct Renewals {
    holds: Arc<Holds>,
    connections: Arc<Connections>,
    lease_ms: u64,
    batch_size: usize,
    /// Set when a renewal counts only once a replica has it.
    replica_sync: Option<Arc<ReplicaSync>>,
}

impl Watchdog {
    /// The watchdog of the holds in `holds`, renewing on `runtime` (started by
    /// [`ensure_running`](Periodic::ensure_running) once a watchdog hold is added).
    ///
    /// A reconnection starts a round at once: if Redis restarted without its data or failed
    /// over to a replica that lacked a lock, the renewal finds the owner's field gone and the
    /// holder is told now, not a third of a lease later.
    pub(crate) fn renewing(
        holds: &Arc<Holds>,
        connections: &Arc<Connections>,
        settings: &Settings,
        replica_sync: &Option<Arc<ReplicaSync>>,
        runtime: &tokio::runtime::Handle,
    ) -> Self {
        let renewals = Renewals {
            holds: holds.clone(),
            connections: connections.clone(),
            lease_ms: crate::util::time::millis(settings.watchdog_timeout),
            batch_size: settings.watchdog_batch_size,
            replica_sync: replica_sync.clone(),
        };
        let (interval, reconnected) = (renewals.interval(), connections.reconnects().listen());
        Periodic::new(renewals, interval, Some(reconnected), runtime)
    }

    /// The lease of watchdog locks, in milliseconds.
    pub(crate) fn lease_ms(&self) -> u64 {
        self.rounds().lease_ms
    }
}

impl Renewals {
    fn interval(&self) -> Duration {
        Duration::from_millis(self.lease_ms / 3)
    }
}

impl Rounds for Renewals {
    fn has_work(&self) -> bool {
        let busy = self.holds.watch.len() > 0;
        if !busy {
            tracing::debug!("watchdog idle: no watchdog lock held");
        }
        busy
    }

    /// One renewal round over every watchdog hold; sooner again if any batch failed to
    /// reach Redis (or, with replica sync on, no replica acknowledged the round).
    async fn round(&self, _woken: bool) -> Duration {
        let slots = self.holds.watch.slot_count();
        if slots == 0 {
            return self.interval();
        }
        let span = tracing::debug_span!("renewal_round", locks = self.holds.watch.len());
        if renew_round(self, slots).instrument(span).await {
            self.interval()
        } else {
            self.interval().min(RETRY_AFTER_FAILURE)
        }
    }
}

/// One renewal round over `slots` places of the watch list: true when every batch was
/// renewed and counted.
async fn renew_round(renewals: &Renewals, slots: usize) -> bool {
    // A pooled connection of its own, so that large batches do not queue in front of lock
    // calls on the shared one; deadpool health-checks it on each checkout.
    // Bounded: a checkout stuck on a frozen server must not hide that the renewals were
    // due and Redis did not take them.
    let checkout = tokio::time::timeout(renewals.interval() / 2, renewals.connections.pooled());
    let pooled = match checkout.await {
        Ok(Ok(conn)) => conn,
        failed => {
            let failure: &dyn std::fmt::Display = match &failed {
                Ok(Err(e)) => e,
                _ => &"no connection in time",
            };
            renewals.connections.unreachable("watchdog", failure);
            // A deadline passing now is a lost connection, not a holder that never asked.
            let (due, _) = renewals.holds.due(0, slots, usize::MAX, Instant::now());
            for hold in due {
                hold.renewal_sent();
            }
            return false;
        }
    };
    let mut conn = pooled.conn.clone();
    let (holds, size) = (&*renewals.holds, renewals.batch_size);
    // Without replica sync a batch is settled as soon as it is answered, while its holds
    // are still in the cache; with it, only once the round's WAIT has answered.
    let settle_now = renewals.replica_sync.is_none();
    let (due, in_flight) = if conn.is_cluster() {
        let due = stream::iter(per_slot(holds, slots, size));
        (due.left_stream(), SLOT_CALLS_IN_FLIGHT)
    } else {
        (
            in_order(holds, slots, size).right_stream(),
            BATCHES_IN_FLIGHT,
        )
    };
    let renew = |due| renew_batch(conn.clone(), renewals.lease_ms, due, settle_now);
    let batches: Vec<Batch> = due.map(renew).buffer_unordered(in_flight).collect().await;
    // One WAIT for the whole round: it covers every write made before it on this
    // connection. A renewal no replica has would be forgotten by a failover, so it must not
    // push the validity forward; a lock found gone is gone either way.
    // On a cluster it waits on every master, and a master whose replicas do not answer
    // voids the renewals of its own slots only.
    let replicated = match renewals.replica_sync.as_deref() {
        Some(sync) => sync.wait_round(&mut conn).await,
        None => Replicated::All,
    };
    let mut failure = None;
    let mut all_counted = true;
    for batch in batches {
        match batch {
            Err(e) => failure = Some(e),
            Ok(None) => {}
            Ok(Some(renewed)) => {
                // A batch is of one slot on a cluster: its first key tells which.
                let counts = replicated.counts(|| renewed.slot());
                all_counted &= counts;
                renewed.settle(counts);
            }
        }
    }
    match &failure {
        Some(e) if crate::error::is_transient(e) => {
            renewals.connections.unreachable("watchdog", e);
        }
        Some(e) => tracing::warn!(error = %e, "lock renewal refused"),
        None => renewals.connections.reachable(),
    }
    failure.is_none() && all_counted
}

/// A round's batches on one Redis: each batch takes its holds from the list when it goes
/// out, not at the round's start, so that a hold is visited once, just before its renewal
/// is written; and takes `size` live holds however many empty slots lie between them, so
/// that a list thinned out by releases costs no more calls than a packed one.
fn in_order(holds: &Holds, slots: usize, size: usize) -> impl Stream<Item = Vec<Arc<Hold>>> + '_ {
    // A plain iterator, polled lazily by the stream: an async cursor trips the compiler's
    // higher-ranked lifetime check on the round's `Send` future.
    let mut from = 0;
    let gathered = stream::iter(std::iter::from_fn(move || {
        (from < slots).then(|| {
            let (due, next) = holds.due(from, slots, size, Instant::now());
            from = next;
            due
        })
    }));
    gathered.flat_map(|due| stream::iter(by_script(due)))
}

/// A round's batches on a cluster: every hold of the round at once, split by renewal
/// script, grouped by hash slot (a script call may name one slot's keys only), then each
/// slot's holds `size` to a call.
/// Gathered for the whole round rather than batch by batch, as Redisson's watchdog does
/// (`slot2names`): a slot's holds spread over several batches would cost a call per batch,
/// where the round needs one per slot (1.32 calls per slot touched at 10,000 locks before,
/// in W6 of BENCHMARKS.md).
fn per_slot(holds: &Holds, slots: usize, size: usize) -> Vec<Vec<Arc<Hold>>> {
    let (due, _) = holds.due(0, slots, usize::MAX, Instant::now());
    by_script(due)
        .into_iter()
        .flat_map(|group| batches(group, true, size, |hold| hold.id.key.as_bytes()))
        .collect()
}

/// `due`, split by the script that renews each hold: plain holds, then a read-write
/// lock's; no empty group.
fn by_script(due: Vec<Arc<Hold>>) -> Vec<Vec<Arc<Hold>>> {
    let plain = |hold: &Arc<Hold>| hold.renewal == Renewal::Key;
    // The common case, a client of plain locks only: the batch as it is.
    let groups = if due.iter().all(plain) {
        [due, Vec::new()]
    } else {
        let (plain, read_write) = due.into_iter().partition(plain);
        [plain, read_write]
    };
    groups
        .into_iter()
        .filter(|group| !group.is_empty())
        .collect()
}

/// What became of one renewal batch: it could not reach Redis, or Redis refused it; or it
/// was answered and applied to its holds (`None`), or is to be applied once the round's
/// WAIT says whether it counts.
type Batch = redis::RedisResult<Option<Renewed>>;

/// What one renewal batch found: for each hold, whether its owner still held it.
struct Renewed {
    holds: Vec<(Arc<Hold>, Applied)>,
    found: Vec<bool>,
    started: Instant,
}

impl Renewed {
    /// The hash slot of the batch's first lock (a cluster's batches are of one slot).
    fn slot(&self) -> u16 {
        self.holds
            .first()
            .map_or(0, |(hold, _)| key_slot(hold.id.key.as_bytes()))
    }

    /// Applies the answers: renewed holds are valid for longer (unless the renewal does not
    /// count, not being replicated), and holds found gone are lost.
    fn settle(self, counts: bool) {
        for ((hold, applied), renewed) in self.holds.iter().zip(self.found) {
            if !renewed {
                hold.found_gone();
            } else if counts {
                hold.renewed(self.started, *applied);
            }
        }
    }
}

/// Sends one batch (of one hash slot, on a cluster), and settles it at once when
/// `settle_now`. A failure, when it could not reach Redis or Redis refused it, is logged
/// once per round by the caller.
async fn renew_batch(
    mut conn: Conn,
    lease_ms: u64,
    due: Vec<Arc<Hold>>,
    settle_now: bool,
) -> Batch {
    let started = Instant::now();
    let mut holds = Vec::with_capacity(due.len());
    for hold in due {
        // Reckoned when the batch goes out: a lease bounded by a maximum hold time must
        // not reach past that time however long the batch waited.
        let applied = hold.lease_at(started);
        if applied.is_spent() {
            // Nothing left of the maximum hold time: the last lease runs out.
            hold.max_hold_reached();
            continue;
        }
        hold.renewal_sent();
        holds.push((hold, applied));
    }
    let found = if holds.is_empty() {
        Vec::new()
    } else {
        match send(&mut conn, lease_ms, &holds).await {
            Ok(found) => {
                let renewed = found.iter().filter(|&&renewed| renewed).count() as u64;
                metrics::renewals(renewed, found.len() as u64 - renewed);
                found
            }
            Err(e) => {
                metrics::renewal_failed();
                tracing::debug!(error = %e, locks = holds.len(), "lock renewal failed");
                return Err(e);
            }
        }
    };
    let renewed = Renewed {
        holds,
        found,
        started,
    };
    if !settle_now {
        return Ok(Some(renewed));
    }
    renewed.settle(true);
    Ok(None)
}

/// Sends the renewals of `holds`, a batch of one kind (see `by_script`): for each, whether
/// its owner still held it.
async fn send(
    conn: &mut Conn,
    lease_ms: u64,
    holds: &[(Arc<Hold>, Applied)],
) -> redis::RedisResult<Vec<bool>> {
    // Its first hold tells which kind.
    if holds[0].0.renewal == Renewal::Key {
        let keys = holds
            .iter()
            .map(|(hold, applied)| (&*hold.id.key, &*hold.id.owner, applied.ms));
        return scripts::renew(conn, lease_ms, keys).await;
    }
    let keys = holds.iter().map(|(hold, applied)| {
        let timeouts = match &hold.renewal {
            Renewal::ReadWrite { read_timeouts } => read_timeouts.as_deref(),
            // Never renewed: permits are not watchdog holds.
            Renewal::Key | Renewal::Permit => None,
        };
        (&*hold.id.key, &*hold.id.owner, timeouts, applied.ms)
    });
    read_write::renew(conn, keys).await
}
