//! The one waiting loop, for a single lock and for a group of locks alike: try, listen
//! for unlocks, try again, then wait for an unlock message or the holder's TTL, whichever
//! comes first.
//!
//! Listening starts only after a first try failed, so an uncontended lock costs one round
//! trip; and every new subscription is followed by another try, since an unlock published
//! between the try and the subscription would otherwise be missed. The TTL bound makes
//! a lost message cost time, never a hang.
//!
//! A call with a wait budget (`try_lock_for`, `try_lock_with`, a synchronizer's timed wait,
//! a group's) rides out failures to reach Redis (a refused or reset connection, a timeout,
//! `LOADING`, `MASTERDOWN`, `READONLY` while a master changes) until its budget is spent,
//! pausing with a backoff that doubles up to a second; it then returns the last error, or
//! `Ok(None)` when Redis answered and the lock was busy. A call without a budget (`lock()`)
//! fails after `retry_attempts` tries, and `try_lock` after its one; so does a write no
//! replica acknowledged, with replica sync. Refused credentials, permissions and input are
//! final at once.
//!
//! On a Redis Cluster, a try refused because the cluster is moving the lock's slot or
//! failing over its master (`MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`, ...: the script
//! certainly did not run) costs time, not an error: the loop tries again after the retry
//! backoff for as long as the caller's wait allows, up to [`TOPOLOGY_PATIENCE`](crate::transport::calls::TOPOLOGY_PATIENCE), without
//! counting it against `retry_attempts`; a wait that runs out meanwhile ends as one that
//! ran out while the lock was held (`Ok(None)`). A failover after a master died takes
//! about two `cluster-node-timeout`s, far longer than a few quick retries.

use crate::util::lock_metrics::{LockMetrics, Waiting};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client_core::Core;
use crate::error::{Error, Result};
use crate::transport::calls::TopologyWait;
use crate::transport::connections::Connections;
use crate::transport::pubsub::{Limit, Subscription, Wake};

/// How long to wait between re-checks when no TTL bounds a wait: the lock key has no expiry
/// (which this crate never writes but a foreign client might), or, for a lock group, the
/// nodes that could report one are down. Without it, a lost wake-up would wait forever.
pub(crate) const NO_TTL_RECHECK: Duration = Duration::from_secs(1);

/// What one try came to.
pub(crate) enum Tried<G> {
    /// Taken: the guard.
    Acquired(G),
    /// Held elsewhere; try again within this long at the latest (`None`: no bound known).
    Busy(Option<Duration>),
}

/// Whether a contender hears the unlocks that could let it in.
pub(crate) enum Listening {
    /// It did already: wait.
    Already,
    /// It just started to: try again before waiting.
    Started,
    /// The caller's wait ran out while it was setting up.
    GaveUp,
}

/// The one channel a single lock's or a synchronizer's waiting call hears its wake-ups on,
/// subscribed when the call first listens; unsubscribed when the call ends.
#[derive(Default)]
pub(crate) struct WakeUps {
    subscription: Option<Subscription>,
    /// The caller's wait left as of the last [`listen`](WakeUps::listen): [`wait_for`]
    /// listens before every wait and caps that wait at this same time left, so a wait
    /// bounded by all of it ends at the caller's deadline, not at the holder's TTL.
    remaining: Duration,
}

impl WakeUps {
    /// Subscribes to the channel `channel` names, once (`Already` after that), waking as
    /// `wake` says, within the caller's `remaining` wait.
    pub(crate) async fn listen(
        &mut self,
        core: &Core,
        channel: impl FnOnce() -> Arc<str>,
        wake: Wake,
        remaining: Duration,
    ) -> Result<Listening> {
        self.remaining = remaining;
        if self.subscription.is_some() {
            return Ok(Listening::Already);
        }
        let limit = core.settings.subscribe_timeout;
        match core
            .listener
            .subscribe_as(&channel(), wake, limit.min(remaining))
            .await
        {
            Ok(subscribed) => self.subscription = Some(subscribed),
            // The caller's own wait ran out while subscribing: a plain "not yet".
            Err(e) if e.is_timeout() && remaining <= limit => return Ok(Listening::GaveUp),
            Err(e) => return Err(e),
        }
        Ok(Listening::Started)
    }

    /// [`Contender::wait`], on this channel: at once when not subscribed.
    pub(crate) async fn wait(&mut self, bound: Duration) {
        if let Some(subscription) = self.subscription.as_mut() {
            subscription
                .wait_within(bound, Limit::of(bound, self.remaining))
                .await;
        }
    }

    /// [`Contender::wakeups_used`], on this channel.
    pub(crate) fn used(&mut self) {
        if let Some(subscription) = self.subscription.as_mut() {
            subscription.wakeup_used();
        }
    }

    /// A try begins: a message that comes while it runs makes the next wait return at once.
    pub(crate) fn trying(&mut self) {
        if let Some(subscription) = self.subscription.as_mut() {
            subscription.trying();
        }
    }
}

/// A single lock or a group, as the waiting loop drives it.
pub(crate) trait Contender {
    /// What a successful try returns.
    type Guard;

    /// One try.
    fn attempt(&mut self) -> impl Future<Output = Result<Tried<Self::Guard>>> + Send;

    /// Makes sure the unlocks that could let it in are heard, within `remaining`.
    fn listen(&mut self, remaining: Duration) -> impl Future<Output = Result<Listening>> + Send;

    /// Waits for a wake-up, at most `bound`.
    fn wait(&mut self, bound: Duration) -> impl Future<Output = ()> + Send;

    /// A try ran: the wake-ups received so far were used, and none is handed on.
    fn wakeups_used(&mut self);

    /// The connections whose retry settings pace retries after failures to reach Redis.
    fn pacing(&self) -> &Connections;

    /// The metrics a wait counts in (the waiting gauge of its class).
    fn metrics(&self) -> &LockMetrics;

    /// Whether a try that failed with `error` may be sent again: not when it may have run
    /// and cannot be undone (a re-entry), since each run would add a count. Asked after a
    /// topology refusal too, where the try did not run, but one before it may have.
    fn may_retry(&self, _error: &Error) -> bool {
        true
    }
}

/// Drives `contender` until it takes its lock, or `deadline` passes (`Ok(None)`), or a
/// failure outlasts the retries.
pub(crate) async fn wait_for<C: Contender>(
    contender: &mut C,
    deadline: Option<Instant>,
) -> Result<Option<C::Guard>> {
    let retry_attempts = contender.pacing().retry_attempts();
    // Whether the caller gave any time to wait (`try_lock` gives none).
    let waits = deadline.map_or(true, |deadline| deadline > Instant::now());
    // A call with a wait budget rides out failures to reach Redis until the budget is
    // spent, rather than for `retry_attempts` tries: a brief outage costs it time, not an
    // error.
    let budgeted = deadline.is_some() && waits;
    let mut failures = 0;
    let mut topology = TopologyWait::new(contender.pacing());
    // Counted among the waiting calls from its first wait on.
    let mut waiting = None;
    loop {
        if contender.pacing().lifecycle.is_stopping() {
            return Err(Error::ShutDown);
        }
        let retry_within = match contender.attempt().await {
            // Taken while the client began to shut down: given back (the guard's drop
            // releases it in the background, which the shutdown waits for).
            Ok(Tried::Acquired(_)) if contender.pacing().lifecycle.is_stopping() => {
                return Err(Error::ShutDown)
            }
            Ok(Tried::Acquired(guard)) => {
                contender.wakeups_used();
                return Ok(Some(guard));
            }
            Ok(Tried::Busy(bound)) => {
                failures = 0;
                topology.settled();
                bound
            }
            // A try is sent again only if the contender may send it again (a request latch
            // it reuses may not outlive the wait).
            Err(e) if !contender.may_retry(&e) => return Err(e),
            Err(e) if topology.rides_out(&e) => {
                let left = remaining(deadline);
                if left.is_zero() {
                    // The caller's wait ran out while the cluster was still changing: not
                    // taken in time, as for a lock held all along. A call that was given
                    // no wait (`try_lock`) made its one try, and says why it failed.
                    return if waits { Ok(None) } else { Err(e) };
                }
                tracing::debug!(error = %e, "the cluster is changing its topology; retrying");
                // The last pause ends at the deadline, for one more try there.
                pause(contender.pacing(), contender.pacing().backoff().min(left)).await;
                continue;
            }
            Err(e) if budgeted && rides_out_outage(&e) => {
                if !ride_out(&e, &mut failures, contender.pacing(), deadline).await {
                    return Err(e);
                }
                continue;
            }
            Err(e) if e.is_connection_error() && failures + 1 < retry_attempts => {
                failures += 1;
                tracing::debug!(error = %e, "acquire failed; retrying");
                let length = contender.pacing().backoff();
                if length >= remaining(deadline) {
                    return Err(e);
                }
                pause(contender.pacing(), length).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        contender.wakeups_used();
        let remaining = remaining(deadline);
        if remaining.is_zero() {
            return Ok(None);
        }
        match contender.listen(remaining).await {
            Ok(Listening::Already) => {}
            Ok(Listening::Started) => continue,
            Ok(Listening::GaveUp) => return Ok(None),
            // Subscribing failed to reach Redis: within a budget, as a failed try.
            Err(e) if budgeted && rides_out_outage(&e) => {
                if !ride_out(&e, &mut failures, contender.pacing(), deadline).await {
                    return Err(e);
                }
                continue;
            }
            Err(e) => return Err(e),
        }
        // Bounded by the same `remaining` that `listen` was given: a wait that ends at it
        // ends at the caller's deadline, which `WakeUps` counts apart from the holder's TTL.
        let bound = retry_within
            .unwrap_or(NO_TTL_RECHECK)
            .max(Duration::from_millis(1))
            .min(remaining);
        waiting.get_or_insert_with(|| Waiting::start(contender.metrics()));
        // A shutdown ends the wait at once; the loop's top then returns.
        let stopping = contender.pacing().lifecycle.stop_signal();
        tokio::select! {
            () = contender.wait(bound) => {}
            () = stopping.cancelled() => {}
        }
    }
}

/// Whether a budgeted call rides out `error`: a failure to reach Redis. Not a write no
/// replica acknowledged ([`Error::NotReplicated`]): each try writes and rolls back on the
/// master, and a replica that does not answer is a deployment's problem, reported after
/// `retry_attempts` tries as before.
fn rides_out_outage(error: &Error) -> bool {
    error.is_connection_error() && !error.is_not_replicated()
}

/// The longest pause between two tries of a call riding out an outage.
const OUTAGE_PAUSE_CAP: Duration = Duration::from_secs(1);

/// Counts one more failure in a row to reach Redis (`error`) in `failures`, and pauses a
/// budgeted call after it: the retry backoff, doubled with each failure up to
/// [`OUTAGE_PAUSE_CAP`], and never past `deadline`, so that the last try is made when the
/// budget ends. Returns false when no budget is left: the caller returns the error.
async fn ride_out(
    error: &Error,
    failures: &mut u32,
    pacing: &Connections,
    deadline: Option<Instant>,
) -> bool {
    *failures += 1;
    let failures = *failures;
    let left = remaining(deadline);
    if left.is_zero() {
        return false;
    }
    let doubled = pacing
        .backoff()
        .saturating_mul(1 << failures.saturating_sub(1).min(10));
    let pause = doubled.min(OUTAGE_PAUSE_CAP).min(left);
    tracing::debug!(%error, failures, ?pause, "cannot reach Redis; retrying within the caller's wait");
    self::pause(pacing, pause).await;
    true
}

/// Sleeps `length`, or until the client begins to shut down.
async fn pause(pacing: &Connections, length: Duration) {
    tokio::select! {
        () = tokio::time::sleep(length) => {}
        () = pacing.lifecycle.stopping() => {}
    }
}

/// Time left until `deadline` (`None`: no deadline, so without end).
pub(crate) fn remaining(deadline: Option<Instant>) -> Duration {
    match deadline {
        Some(deadline) => deadline.saturating_duration_since(Instant::now()),
        None => Duration::MAX,
    }
}

/// The deadline of a wait of `wait` from now (`None`: without end, also for a `wait` too
/// large to add to the clock).
pub(crate) fn deadline_after(wait: Option<Duration>) -> Option<Instant> {
    wait.and_then(|wait| Instant::now().checked_add(wait))
}
