//! The acquire loop every waiting lock call runs, for every lock kind: try the script,
//! subscribe, try again, then wait for an unlock message or the holder's TTL, whichever
//! comes first.
//!
//! A fair lock's waiter subscribes to its own channel and only then joins the queue, so
//! that from the moment it is queued, a PUBLISH to it that reaches nobody means its
//! process is gone (see `notify_head` in `lua/fair_common.lua`). Its first attempt does not
//! queue: an uncontended lock costs one round trip, as for a plain lock.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use crate::client::Client;
use crate::detach::FinishOnDrop;
use crate::error::Result;
use crate::explain;
use crate::guard::LockGuard;
use crate::hold::{Applied, Hold, Lease, Terms};
use crate::names::LockNames;
use crate::owner::current_owner_field;
use crate::pubsub::Subscription;
use crate::queue::{leave_in_background, QueuePlace};
use crate::release::Release;
use crate::release::Released;
use crate::scripts::{AcquireCall, AcquireReply};

/// How long to wait between re-checks when no TTL bounds a wait: the lock key has no expiry
/// (which this crate never writes but a foreign client might), or, for a lock group, the
/// nodes that could report one are down. Without it, a lost wake-up would wait forever.
pub(crate) const NO_TTL_RECHECK: Duration = Duration::from_secs(1);

/// What one run of the acquire script found.
pub(crate) enum Attempt {
    Acquired(LockGuard),
    /// Not taken; try again within this long at the latest (`None`: no bound known).
    RetryWithin(Option<Duration>),
}

/// What a waiting call has set up, undone when it ends, however it ends.
#[derive(Default)]
struct Waiting {
    subscription: Option<Subscription>,
    /// Fair locks: the place in the queue, once the call is willing to wait.
    place: Option<QueuePlace>,
}

/// What an acquire asks for: its lease, and how long the hold may last at most, counted
/// from the acquire that takes the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) lease: Lease,
    pub(crate) max_hold: Option<Duration>,
}

impl Request {
    /// The terms of an acquire sent at `started`.
    fn terms(self, started: Instant) -> Terms {
        Terms {
            lease: self.lease,
            max_until: self.max_hold.and_then(|hold| started.checked_add(hold)),
        }
    }
}

/// Takes the lock for the task calling this, waiting up to `wait` (`None`: for as long as
/// it takes). `Ok(None)` means the wait ran out while someone else held the lock.
pub(crate) async fn acquire(
    client: &Client,
    names: &Arc<LockNames>,
    request: Request,
    wait: Option<Duration>,
) -> Result<Option<LockGuard>> {
    let owner = current_owner_field(&client.inner.id_text);
    let deadline = wait.and_then(|w| Instant::now().checked_add(w));
    let mut waiting = Waiting::default();
    let outcome = wait_for_lock(client, names, &owner, request, deadline, &mut waiting).await;
    if let Some(place) = waiting.place.take() {
        match &outcome {
            Ok(Some(_)) => place.taken(),
            // Left before returning, so that the caller sees the queue without it and the
            // waiter behind it is already told.
            Ok(None) => place.leave().await,
            // Redis is failing: do not hold the error back for a leave that will fail too.
            Err(_) => drop(place),
        }
    }
    outcome
}

async fn wait_for_lock(
    client: &Client,
    names: &Arc<LockNames>,
    owner: &Arc<str>,
    request: Request,
    deadline: Option<Instant>,
    waiting: &mut Waiting,
) -> Result<Option<LockGuard>> {
    let retry_attempts = client.inner.connections.retry_attempts();
    let mut failures = 0;
    loop {
        let join_queue = waiting.place.is_some();
        let retry_within = match attempt(client, names, owner, request, join_queue).await {
            Ok(Attempt::Acquired(guard)) => {
                // The wake-up, if any, was used: do not hand it on from `Drop`.
                if let Some(subscription) = waiting.subscription.as_mut() {
                    subscription.wakeup_used();
                }
                return Ok(Some(guard));
            }
            Ok(Attempt::RetryWithin(bound)) => {
                failures = 0;
                bound
            }
            Err(e) if e.is_connection_error() && failures + 1 < retry_attempts => {
                failures += 1;
                tracing::debug!(lock = %names.key, error = %e, "acquire failed; retrying");
                let pause = client.inner.connections.backoff();
                if !sleep_within(pause, deadline).await {
                    return Err(e);
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        if let Some(subscription) = waiting.subscription.as_mut() {
            subscription.wakeup_used();
        }
        let remaining = remaining(deadline);
        if remaining.is_zero() {
            return Ok(None);
        }
        let Some(subscription) = waiting.subscription.as_mut() else {
            let limit = client.inner.settings.subscribe_timeout;
            let channel = names.wait_channel(owner);
            match client
                .inner
                .listener
                .subscribe(&channel, limit.min(remaining))
                .await
            {
                Ok(subscribed) => waiting.subscription = Some(subscribed),
                // The caller's own wait ran out while subscribing: a plain "not acquired".
                Err(e) if e.is_timeout() && remaining <= limit => return Ok(None),
                Err(e) => return Err(e),
            }
            if names.queue.is_some() {
                waiting.place = Some(QueuePlace::claim(client, names, owner));
            }
            // Try again now that unlocks are heard (and, for a fair lock, joining the
            // queue): one published between the first try and the subscription would
            // otherwise be missed.
            continue;
        };
        let bound = retry_within
            .unwrap_or(NO_TTL_RECHECK)
            .max(Duration::from_millis(1));
        subscription.wait(bound.min(remaining)).await;
    }
}

/// Whether a failed script call may still have run in Redis: anything but a refused
/// connection or an error Redis itself returned (a timed-out command is not withdrawn).
fn may_have_run(error: &redis::RedisError) -> bool {
    crate::error::is_transient(error) && !error.is_connection_refusal()
}

/// Time left until `deadline` (`None`: no deadline, so without end).
pub(crate) fn remaining(deadline: Option<Instant>) -> Duration {
    match deadline {
        Some(deadline) => deadline.saturating_duration_since(Instant::now()),
        None => Duration::MAX,
    }
}

/// Sleeps `pause` unless that would pass `deadline`; returns whether time is left after it.
async fn sleep_within(pause: Duration, deadline: Option<Instant>) -> bool {
    if pause >= remaining(deadline) {
        return false;
    }
    tokio::time::sleep(pause).await;
    true
}

/// One run of the acquire script; for a fair lock, `join_queue` also queues the caller
/// (or refreshes its place) when the lock is not taken.
///
/// With replica sync on, a lock taken counts only once a replica has it: otherwise it is
/// taken back and the attempt fails with [`Error::NotReplicated`](crate::Error::NotReplicated).
///
/// # Cancel safety
/// The script call finishes even if this future is dropped; a lock it took for a caller who
/// left is released again at once, and a place it took in the queue is left.
pub(crate) async fn attempt(
    client: &Client,
    names: &Arc<LockNames>,
    owner: &Arc<str>,
    request: Request,
    join_queue: bool,
) -> Result<Attempt> {
    let inner = &client.inner;
    // At the kind's first use: may the user run every command its scripts run?
    inner.commands.ensure(&inner.connections, names).await?;
    // A write that waits for replicas blocks its connection meanwhile: it goes out on a
    // pooled connection of its own, kept checked out until its WAIT is answered.
    let (conn, shared, checkout) = match &inner.replica_sync {
        None => {
            let shared = inner.connections.shared().await?;
            (shared.conn.clone(), Some(shared), None)
        }
        Some(_) => {
            let pooled = inner.connections.pooled().await?;
            ((*pooled).clone(), None, Some(pooled))
        }
    };
    // An undo of this attempt goes out on the pooled connection too: on the shared one it
    // could overtake an attempt that Redis has not run yet.
    let pinned = checkout.as_ref().map(|pooled| (**pooled).clone());
    // Until this attempt is settled, a release of the owner's leftover counts keeps off
    // the lock: the count this attempt adds may be in Redis before its hold is here.
    let id = inner.holds.id(&names.key, owner);
    let _in_flight = inner.holds.attempt_started(&id);
    let started = Instant::now();
    let terms = inner.holds.terms_for(&id, request.terms(started));
    let applied = Applied::within(terms.lease.millis(), terms.max_until, started);
    let call = {
        let (mut conn, names, owner) = (conn, names.clone(), owner.clone());
        let place_ms = inner.heartbeat.place_ms();
        let sync = inner.replica_sync.clone();
        let batcher = inner.acquires.clone();
        async move {
            let _checkout = checkout;
            let call = AcquireCall {
                names: &names,
                lease_ms: applied.ms,
                owner: &owner,
                join_queue,
                place_ms,
                // With replica sync, each acquire has a connection of its own to WAIT on.
                batcher: sync.is_none().then_some(&batcher),
            };
            let reply = call.run(conn.clone()).await?;
            let unreplicated = match (&reply, sync) {
                (AcquireReply::Acquired { .. }, Some(sync)) => sync.wait(&mut conn).await.err(),
                _ => None,
            };
            Ok((reply, unreplicated))
        }
    };
    let orphaned = (
        client.clone(),
        names.clone(),
        owner.clone(),
        id.clone(),
        pinned.clone(),
    );
    let outcome = FinishOnDrop::new(call, move |outcome| {
        let (client, names, owner, id, pinned) = orphaned;
        // The caller left: undo what the attempt took, or may have taken.
        let (took_lock, may_be_queued) = match &outcome {
            Ok((AcquireReply::Acquired { .. }, _)) => (true, false),
            Ok((AcquireReply::RetryWithin(_), _)) => (false, join_queue),
            Ok((AcquireReply::NotALock, _)) => (false, false),
            Err(e) => (
                may_have_run(e) && !client.inner.holds.is_held(&id),
                join_queue && may_have_run(e),
            ),
        };
        if may_be_queued {
            // After the attempt, so that the place it took is the one left.
            leave_in_background(client.clone(), names.clone(), owner.clone());
        }
        if took_lock {
            // In the background: nobody waits for this call any more.
            client
                .clone()
                .spawn(undo(client, names, owner, applied, started, pinned));
        }
    })
    .on(client.runtime())
    .await;
    if outcome.is_ok() && shared.is_some() {
        inner.connections.report_success();
    }
    match outcome {
        Ok((AcquireReply::Acquired { .. }, Some(unreplicated))) => {
            // The master has it and no replica does: a failover would forget it while we
            // counted on it. Taken back, awaited so that it reaches Redis before a retry.
            let undoing = undo(
                client.clone(),
                names.clone(),
                owner.clone(),
                applied,
                started,
                pinned,
            );
            FinishOnDrop::new(undoing, |()| {})
                .on(client.runtime())
                .await;
            Err(unreplicated)
        }
        Ok((AcquireReply::Acquired { token }, None)) => {
            let hold = inner.holds.add(&id, terms, started, applied);
            if hold.is_watchdog() {
                inner.watchdog.ensure_running();
            } else {
                inner.lease_check.ensure_running();
            }
            tracing::debug!(lock = %names.key, %owner, "acquired");
            Ok(Attempt::Acquired(LockGuard::new(
                client.clone(),
                names.clone(),
                hold,
                token,
            )))
        }
        Ok((AcquireReply::RetryWithin(wait_ms), _)) => Ok(Attempt::RetryWithin(
            u64::try_from(wait_ms).ok().map(Duration::from_millis),
        )),
        Ok((AcquireReply::NotALock, _)) => {
            Err(explain::not_a_lock(&inner.connections, names.key.to_string()).await)
        }
        Err(e) => {
            if let Some(shared) = &shared {
                inner.connections.report(shared, &e);
            }
            // The script may still run (a timed-out command is not withdrawn). If this owner
            // held nothing here, any hold it finds was taken by this very attempt: undo it.
            // A re-entry cannot be undone blindly, since it may not have run; at worst its
            // extra count keeps the lock until the lease runs out after the last unlock.
            if may_have_run(&e) && !inner.holds.is_held(&id) {
                // No other hold of this owner to keep: take the count back, and leave the
                // TTL alone should another call of the owner hold it meanwhile.
                let undo =
                    Release::new(client.clone(), names.clone(), owner.clone(), 0).pinned_to(pinned);
                // Awaited, so that it reaches Redis before any retry of the acquire; finished
                // in the background if the caller leaves meanwhile.
                FinishOnDrop::new(undo.run_once(), |()| {})
                    .on(client.runtime())
                    .await;
            }
            Err(explain::explain(&inner.connections, "acquiring", names, e.into()).await)
        }
    }
}

/// Undoes an acquire, sent at `started` and applying `abandoned`, that took the lock for
/// nobody: its caller left, or no replica has it.
///
/// If the owner holds the lock through another guard, the undone call was a re-entry and
/// reset the key's TTL to its own lease, which may be shorter than the live hold's: the
/// hold's validity assumes the shorter one until the undo, which re-applies the hold's own
/// lease, is confirmed. Otherwise the undo takes the count back and leaves the TTL alone.
///
/// With replica sync on, the restored lease is not waited for, so it does not count: the
/// hold's validity stays where the undone call left it until a renewal a replica
/// acknowledged. `pinned` is the connection the undone call went out on, if not the shared
/// one.
fn undo(
    client: Client,
    names: Arc<LockNames>,
    owner: Arc<str>,
    abandoned: Applied,
    started: Instant,
    pinned: Option<MultiplexedConnection>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let holds = &client.inner.holds;
    let live: Option<Arc<Hold>> = holds.live(&holds.id(&names.key, &owner));
    let undo_started = Instant::now();
    let restore = live.as_ref().map(|hold| {
        hold.cap_validity(started, abandoned);
        hold.lease_at(undo_started)
    });
    let lease_ms = restore.map_or(0, |applied| applied.ms);
    let counts = client.inner.replica_sync.is_none();
    async move {
        let key = names.key.clone();
        let release = Release::new(client, names, owner, lease_ms).pinned_to(pinned);
        match release.run().await {
            Ok(Released::StillHeld) => {
                if let (Some(hold), Some(applied), true) = (live, restore, counts) {
                    hold.lease_applied(undo_started, applied);
                }
            }
            Ok(outcome) => tracing::debug!(lock = %key, ?outcome, "acquire undone"),
            Err(e) => {
                tracing::warn!(lock = %key, error = %e, "could not undo an acquire; it expires with its lease")
            }
        }
    }
}
