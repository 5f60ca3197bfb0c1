//! [`Client::shutdown`](crate::Client::shutdown): a service's clean exit, and what it
//! reports ([`ShutdownReport`]).
//!
//! Without it, a process that exits leaves every lock it held for the rest of its lease
//! (the watchdog's 30 s by default): a release from a guard's `Drop` runs in the
//! background, on a runtime that is about to end. Redisson's `shutdown()` is the model.
//!
//! The steps, within the caller's timeout:
//! 1. acquires are refused from now on ([`Error::ShutDown`]), and calls waiting for a lock
//!    or for permits return with it at once, leaving their fair-queue places on the way
//!    out; a try already sent finishes (a lock it took is released again);
//! 2. every guard still out is taken off the client's list, its lost signal resolves
//!    [`LostReason::ShutDown`], and what it holds is released
//!    through its kind's own script, so that waiters are told at once (fair queues move
//!    on, read and write holds go each by their own rules, permits come back);
//! 3. releases already running in the background finish, and the request latches waiting
//!    for their batch are deleted (a Redis Cluster client's semaphore and latch count
//!    changes leave them; lock releases write none);
//! 4. the watchdog, the fair-queue heartbeat, the lease check and the unlock listener stop,
//!    and the connections close.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{join_all, BoxFuture, FutureExt};
use tokio::time::{timeout_at, Instant};

use crate::client_core::handed_out::Outstanding;
use crate::client_core::Core;
use crate::error::{Error, LostReason, Result};
use crate::holds::Hold;
use crate::locks::guard;
use crate::protocol::names::LockNames;
use crate::sync::permit::release_one;
use crate::sync::semaphore_guard::give_back;

/// What [`Client::shutdown`](crate::Client::shutdown) did.
///
/// ```no_run
/// # async fn demo(client: redis_rlock::Client) {
/// let report = client.shutdown(std::time::Duration::from_secs(5)).await;
/// for left in &report.not_released {
///     eprintln!("{} `{}` stays until its lease runs out: {}", left.what, left.key, left.error);
/// }
/// # }
/// ```
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Guards whose hold (a lock's, an expirable permit's) or permits were released.
    pub released: usize,
    /// Guards whose lock or permit was lost before the shutdown (expired, released by
    /// someone else): nothing was left to release.
    pub already_lost: usize,
    /// What could not be released, and why: each stays until its lease runs out (a
    /// [`Semaphore`](crate::Semaphore)'s permits, which have none, stay taken).
    pub not_released: Vec<NotReleased>,
}

impl ShutdownReport {
    /// Whether everything the client held was released (or was lost already).
    pub fn is_complete(&self) -> bool {
        self.not_released.is_empty()
    }
}

/// One thing a shutdown could not release.
#[derive(Debug)]
#[non_exhaustive]
pub struct NotReleased {
    /// `"lock"`, `"semaphore permits"` or `"expirable permit"`; `"client"` (with no key)
    /// when the client's runtime ended before the shutdown could.
    pub what: &'static str,
    /// Its Redis key.
    pub key: String,
    /// Why: a connection error, or [`Error::Timeout`] when the shutdown's time ran out
    /// first.
    pub error: Error,
}

/// The release of one thing: what it is, its key, how many guards it stands for, and the
/// outcome for each.
type Releasing = (
    &'static str,
    Arc<str>,
    usize,
    BoxFuture<'static, Vec<Result<()>>>,
);

/// Runs the shutdown of `core` within `timeout` (see the module docs).
pub(crate) async fn shut_down(core: &Arc<Core>, timeout: Duration) -> ShutdownReport {
    let lifecycle = &core.connections.lifecycle;
    if !lifecycle.begin() {
        // Another call shuts the client down: this one waits for it.
        let _ = tokio::time::timeout(timeout, lifecycle.finished()).await;
        return ShutdownReport::default();
    }
    // On the client's runtime, to its end even if the caller stops waiting: a shutdown cut
    // short would leave the guards it took off the list unreleased, and the client open.
    let running = core
        .background()
        .spawn_uncounted(run(core.clone(), timeout));
    running.await.unwrap_or_else(|_| ShutdownReport {
        // The runtime ended under it: what the guards held expires with their leases.
        not_released: vec![NotReleased {
            what: "client",
            key: String::new(),
            error: Error::RuntimeGone,
        }],
        ..ShutdownReport::default()
    })
}

/// The shutdown itself, once begun.
async fn run(core: Arc<Core>, timeout: Duration) -> ShutdownReport {
    let core = &core;
    let lifecycle = &core.connections.lifecycle;
    let started = Instant::now();
    // A timeout too large to add to the clock waits without a bound, in effect.
    let deadline = started
        .checked_add(timeout)
        .unwrap_or_else(|| started + Duration::from_secs(100 * 365 * 24 * 3600));
    tracing::info!(client = %core.id, "shutting down");
    // Waiting calls return at once; a try in flight gets up to half the time to finish,
    // and the releases the rest.
    let settled = tokio::time::timeout(timeout / 2, lifecycle.work_done()).await;
    if settled.is_err() {
        tracing::debug!(client = %core.id, "calls still on their way; releasing what is held");
    }
    let report = release_all(core, deadline, timeout).await;
    // Releases that guards dropped meanwhile started in the background, then the
    // synchronizers' request latches.
    let _ = timeout_at(deadline, async {
        lifecycle.work_done().await;
        core.latches.flush().await;
    })
    .await;
    core.watchdog.stop();
    core.lease_check.stop();
    core.heartbeat.stop();
    core.listener.close();
    core.connections.close();
    lifecycle.finish();
    tracing::info!(
        client = %core.id,
        released = report.released,
        not_released = report.not_released.len(),
        took = ?started.elapsed(),
        "shut down"
    );
    report
}

/// Releases what every guard still out holds, each through its kind's script, until
/// `deadline`.
async fn release_all(core: &Arc<Core>, deadline: Instant, timeout: Duration) -> ShutdownReport {
    let mut releases: Vec<Releasing> = Vec::new();
    // Each hold once, with its guards (the hold's address tells them apart while held).
    let mut locks: HashMap<usize, (Arc<LockNames>, Arc<Hold>, usize)> = HashMap::new();
    for holding in core.handed_out.take_all() {
        match holding {
            Outstanding::Lock { names, hold } => {
                locks
                    .entry(Arc::as_ptr(&hold) as usize)
                    .or_insert_with(|| (names, hold, 0))
                    .2 += 1;
            }
            Outstanding::Permits { names, permits } => {
                let given = give_back(core.clone(), names.clone(), permits);
                let release = given.map(|outcome| vec![outcome]).boxed();
                releases.push(("semaphore permits", names.key.clone(), 1, release));
            }
            Outstanding::Permit { names, id, hold } => {
                let lost = lost_before(&hold);
                let released = release_one(core.clone(), names.clone(), id, hold, lost);
                let release = released.map(|outcome| vec![outcome]).boxed();
                releases.push(("expirable permit", names.key.clone(), 1, release));
            }
        }
    }
    for (names, hold, guards) in locks.into_values() {
        let lost = lost_before(&hold);
        let (core, key) = (core.clone(), names.key.clone());
        // One guard after the other: each release takes one count, and the last one
        // frees the lock and tells the next waiter.
        let release = async move {
            let mut outcomes = Vec::with_capacity(guards);
            for _ in 0..guards {
                let release = guard::release_one(core.clone(), names.clone(), hold.clone(), lost);
                outcomes.push(release.await);
            }
            outcomes
        };
        releases.push(("lock", key, guards, release.boxed()));
    }
    let timed = releases
        .into_iter()
        .map(|(what, key, guards, release)| async move {
            (what, key, guards, timeout_at(deadline, release).await)
        });
    let timed_out = || Error::Timeout {
        during: "releasing on shutdown",
        after: timeout,
    };
    let mut report = ShutdownReport::default();
    for (what, key, guards, outcomes) in join_all(timed).await {
        // Past the deadline, each guard it stands for is reported not released.
        let outcomes = outcomes.unwrap_or_else(|_| (0..guards).map(|_| Err(timed_out())).collect());
        for outcome in outcomes {
            match outcome {
                Ok(()) => report.released += 1,
                Err(e) if e.is_lock_lost() => report.already_lost += 1,
                Err(error) => report.not_released.push(NotReleased {
                    what,
                    key: key.to_string(),
                    error,
                }),
            }
        }
    }
    for left in &report.not_released {
        tracing::warn!(what = left.what, key = %left.key, error = %left.error, "not released on shutdown; it expires with its lease");
    }
    report
}

/// Whether `hold` was lost before the shutdown; marks it lost to the shutdown otherwise,
/// which resolves its guards' lost signals at once.
fn lost_before(hold: &Hold) -> Option<LostReason> {
    // A permit only assumed expired is released all the same: its lease may have been
    // extended elsewhere.
    let before = hold.known_lost();
    hold.mark_lost(LostReason::ShutDown);
    before
}
