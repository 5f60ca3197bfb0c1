//! The acquire loop every waiting lock call runs: try the script, subscribe, try again,
//! then wait for an unlock message or the holder's TTL, whichever comes first.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::Client;
use crate::detach::FinishOnDrop;
use crate::error::Result;
use crate::guard::LockGuard;
use crate::hold::Lease;
use crate::names::LockNames;
use crate::owner::current_owner_field;
use crate::pubsub::Subscription;
use crate::release::{release_in_background, Release};
use crate::scripts;

/// How long to wait between re-checks when the lock key has no expiry at all, which this
/// crate never writes but a foreign client might: without a TTL there is no other bound
/// on a wait whose wake-up message was lost.
const NO_TTL_RECHECK: Duration = Duration::from_secs(1);

/// What one run of the acquire script found.
enum Attempt {
    Acquired(LockGuard),
    /// Held by someone else, for this long at most (`None`: the key has no expiry).
    HeldFor(Option<Duration>),
}

/// Takes the lock for the task calling this, waiting up to `wait` (`None`: for as long as
/// it takes). `Ok(None)` means the wait ran out while someone else held the lock.
pub(crate) async fn acquire(
    client: &Client,
    names: &Arc<LockNames>,
    lease: Lease,
    wait: Option<Duration>,
) -> Result<Option<LockGuard>> {
    let owner = current_owner_field(&client.inner.id_text);
    let deadline = wait.and_then(|w| Instant::now().checked_add(w));
    let retry_attempts = client.inner.connections.retry_attempts();
    let mut failures = 0;
    let mut subscription: Option<Subscription> = None;
    loop {
        let held_for = match attempt(client, names, &owner, lease).await {
            Ok(Attempt::Acquired(guard)) => {
                // The wake-up, if any, was used: do not hand it on from `Drop`.
                if let Some(subscription) = subscription.as_mut() {
                    subscription.wakeup_used();
                }
                return Ok(Some(guard));
            }
            Ok(Attempt::HeldFor(ttl)) => {
                failures = 0;
                ttl
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
        if let Some(subscription) = subscription.as_mut() {
            subscription.wakeup_used();
        }
        let remaining = remaining(deadline);
        if remaining.is_zero() {
            return Ok(None);
        }
        let Some(subscription) = subscription.as_mut() else {
            let limit = client.inner.settings.subscribe_timeout;
            match client
                .inner
                .listener
                .subscribe(&names.channel, limit.min(remaining))
                .await
            {
                Ok(subscribed) => subscription = Some(subscribed),
                // The caller's own wait ran out while subscribing: a plain "not acquired".
                Err(e) if e.is_timeout() && remaining <= limit => return Ok(None),
                Err(e) => return Err(e),
            }
            // Try again now that unlocks are heard: one published between the first try and
            // the subscription would otherwise be missed.
            continue;
        };
        let bound = held_for
            .unwrap_or(NO_TTL_RECHECK)
            .max(Duration::from_millis(1));
        subscription.wait(bound.min(remaining)).await;
    }
}

/// Whether a failed script call may still have run in Redis: anything but a refused
/// connection or an error Redis itself returned (a timed-out command is not withdrawn).
fn may_have_run(error: &redis::RedisError) -> bool {
    crate::connection::is_transient(error) && !error.is_connection_refusal()
}

fn remaining(deadline: Option<Instant>) -> Duration {
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

/// One run of the acquire script.
///
/// # Cancel safety
/// The script call finishes even if this future is dropped; a lock it took for a caller who
/// left is released again at once.
async fn attempt(
    client: &Client,
    names: &Arc<LockNames>,
    owner: &Arc<str>,
    requested: Lease,
) -> Result<Attempt> {
    let inner = &client.inner;
    let lease = inner.holds.lease_for(&names.key, owner, requested);
    let shared = inner.connections.shared().await?;
    let started = Instant::now();
    let call = {
        let (conn, key, owner) = (shared.conn.clone(), names.key.clone(), owner.clone());
        async move { scripts::acquire(conn, &key, lease.millis(), &owner).await }
    };
    let orphaned = (client.clone(), names.clone(), owner.clone());
    let outcome = FinishOnDrop::new(call, move |outcome| {
        let (client, names, owner) = orphaned;
        // The caller left: undo what the attempt took, or may have taken.
        let undo = match &outcome {
            Ok(None) => true,
            Ok(Some(_)) => false,
            Err(e) => may_have_run(e) && !client.inner.holds.is_held(&names.key, &owner),
        };
        if undo {
            release_in_background(Release::new(client, names, owner, lease.millis()));
        }
    })
    .await;
    if outcome.is_ok() {
        inner.connections.report_success();
    }
    match outcome {
        Ok(None) => {
            let hold = inner.holds.add(&names.key, owner, lease, started);
            if hold.is_watchdog() {
                inner.watchdog.ensure_running();
            }
            tracing::debug!(lock = %names.key, %owner, "acquired");
            Ok(Attempt::Acquired(LockGuard::new(
                client.clone(),
                names.clone(),
                hold,
            )))
        }
        Ok(Some(pttl)) => Ok(Attempt::HeldFor(
            u64::try_from(pttl).ok().map(Duration::from_millis),
        )),
        Err(e) => {
            inner.connections.report(&shared, &e);
            // The script may still run (a timed-out command is not withdrawn). If this owner
            // held nothing here, any hold it finds was taken by this very attempt: undo it.
            // A re-entry cannot be undone blindly, since it may not have run; at worst its
            // extra count keeps the lock until the lease runs out after the last unlock.
            if may_have_run(&e) && !inner.holds.is_held(&names.key, owner) {
                let undo =
                    Release::new(client.clone(), names.clone(), owner.clone(), lease.millis());
                // Awaited, so that it reaches Redis before any retry of the acquire; finished
                // in the background if the caller leaves meanwhile.
                FinishOnDrop::new(undo.run_once(), |()| {}).await;
            }
            Err(e.into())
        }
    }
}
