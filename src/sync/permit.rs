//! [`ExpirablePermit`]: one permit of a
//! [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore), with its id and lease,
//! released by [`ExpirablePermit::release`] or on drop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client_core::handed_out::Outstanding;
use crate::client_core::Core;
use crate::error::{Error, LostReason, Result};
use crate::holds::{drift, Applied, Hold};
use crate::protocol::names::SyncNames;
use crate::protocol::scripts::{self, PermitRelease};
use crate::sync::call::{self, Kind};
use crate::transport::calls::Outcome;
use crate::util::detach::FinishOnDrop;

/// One permit of a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore).
///
/// It lasts until it is released ([`release`](ExpirablePermit::release), or dropped: then
/// in the background on the client's runtime), released by its id from anywhere
/// ([`PermitExpirableSemaphore::release_by_id`](crate::PermitExpirableSemaphore::release_by_id),
/// Redisson's `release(id)`), or its lease runs out: then any call on the semaphore gives
/// it back. Nothing renews a lease by itself; [`update_lease_time`](ExpirablePermit::update_lease_time)
/// sets a new one, and so may any other client, by id (Redisson's `updateLeaseTime`).
///
/// [`valid_until`](ExpirablePermit::valid_until) is the acquire's start + the lease − 1 %
/// of the lease − 2 ms, on this process's monotonic clock: from then on
/// [`is_lost`](ExpirablePermit::is_lost) says the permit must be assumed lost. Since its
/// lease may have been extended elsewhere, [`lost`](ExpirablePermit::lost) then asks Redis
/// (one round trip): it resolves `Expired` when Redis agrees, or cannot answer, and
/// otherwise watches the permit until its new expiry. It resolves at once when this client
/// releases the permit by id, or finds, after a reconnection, that Redis forgot it (a
/// restart, a failover). A release past the deadline asks Redis too, and frees the permit
/// if Redis still has it; releasing a permit known lost is
/// [`Error::PermitLost`], and never releases anyone else's.
#[must_use = "if unused the permit is released immediately"]
#[clippy::has_significant_drop]
pub struct ExpirablePermit {
    /// `None` once released or forgotten.
    state: Option<PermitState>,
}

struct PermitState {
    core: Arc<Core>,
    names: Arc<SyncNames>,
    id: [u8; 16],
    /// Its registration with the client: the id in hex is its owner, the permits' sorted
    /// set its key; the lease check looks for it there after a reconnection.
    hold: Arc<Hold>,
    /// Its entry in the client's list of guards (see [`HandedOut`](crate::client_core::handed_out)).
    ticket: u64,
}

impl std::fmt::Debug for ExpirablePermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("ExpirablePermit");
        if let Some(state) = &self.state {
            debug
                .field("semaphore", &state.names.key)
                .field("id", &state.hold.id.owner)
                .field("lost", &state.hold.lost_reason());
        }
        debug.finish()
    }
}

impl ExpirablePermit {
    pub(crate) fn new(
        core: Arc<Core>,
        names: Arc<SyncNames>,
        id: [u8; 16],
        hold: Arc<Hold>,
    ) -> Self {
        let ticket = core.handed_out.list(Outstanding::Permit {
            names: names.clone(),
            id,
            hold: hold.clone(),
        });
        ExpirablePermit {
            state: Some(PermitState {
                core,
                names,
                id,
                hold,
                ticket,
            }),
        }
    }

    fn state(&self) -> &PermitState {
        self.state
            .as_ref()
            .expect("an ExpirablePermit holds its state until it is consumed")
    }

    /// The permit's id: the 16 random bytes stored in Redis, in 32 lowercase hex digits,
    /// as Redisson shows its ids. Any client can release the permit by it.
    pub fn id(&self) -> &str {
        &self.state().hold.id.owner
    }

    /// The semaphore's Redis key: the client's key prefix followed by its name.
    pub fn semaphore(&self) -> &str {
        &self.state().names.key
    }

    /// The instant until which the permit is certainly still taken, on this process's
    /// monotonic clock (see the type's docs); once it is found lost, when that happened
    /// at the latest.
    pub fn valid_until(&self) -> std::time::Instant {
        self.state().hold.valid_until().into_std()
    }

    /// Whether the permit is known to be, or must be assumed, lost: its lease ran out, or
    /// it was released by id or forgotten by Redis.
    pub fn is_lost(&self) -> bool {
        self.state().hold.lost_reason().is_some()
    }

    /// Resolves when the permit is lost, with the reason:
    /// [`Expired`](crate::LostReason::Expired) once its
    /// [`valid_until`](ExpirablePermit::valid_until) passed and Redis agrees (another
    /// client, Redisson's `updateLeaseTime` too, may have extended the lease: the permit is
    /// then watched until the new expiry), or at that deadline when Redis cannot be asked;
    /// [`Released`](crate::LostReason::Released) as soon as this client releases it by id,
    /// or finds after a reconnection that Redis no longer has it. Never resolves for a
    /// permit that stays taken. It does not borrow the permit, so it can race the work.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        let state = self.state();
        let (core, names, id, hold) = (
            state.core.clone(),
            state.names.clone(),
            state.id,
            state.hold.clone(),
        );
        async move {
            loop {
                hold.lost().await;
                // Marked lost (or, for no permit, past the deadline): that is the answer.
                if let Some(reason) = hold.known_lost() {
                    return reason;
                }
                // Past the deadline and unconfirmed: ask. Otherwise another watcher moved
                // the deadline, or the permit was released: wait on.
                if hold.assumed_expired() {
                    confirm_expiry(&core, &names, &id, &hold).await;
                }
            }
        }
    }

    /// Sets the permit's lease anew, `lease` from now (Redisson's
    /// `updateLeaseTime(id, lease)`): for work that takes longer than planned. Its
    /// [`valid_until`](ExpirablePermit::valid_until) moves with it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a lease under 10 ms or
    /// over ten years (nothing sent); [`Error::PermitLost`] when
    /// the permit was lost before (nothing sent), or is found gone (its lease ran out,
    /// someone released it by id); [`Error::ShutDown`] after the
    /// client's shutdown; a connection error (retried: a new lease set twice is the same
    /// lease, a moment later).
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the lease may or may not have been set.
    pub async fn update_lease_time(&self, lease: Duration) -> Result<()> {
        let lease_ms = crate::sync::check::lease(lease)?;
        let state = self.state();
        let hold = &state.hold;
        // No expiry check acts on the lease meanwhile (see `confirm_expiry`).
        let _changing = hold.lease_change().await;
        if let Some(reason) = hold.known_lost() {
            return Err(lost_from(&state.names, hold, reason));
        }
        if update_lease(&state.core, &state.names, &state.id, lease_ms, Some(hold)).await? {
            return Ok(());
        }
        hold.found_gone();
        let reason = hold.lost_reason().unwrap_or(LostReason::Released);
        Err(lost_from(&state.names, hold, reason))
    }

    /// Releases the permit and tells the waiters. Past its
    /// [`valid_until`](ExpirablePermit::valid_until) too, unless it is known lost: its lease
    /// may have been extended elsewhere, and Redis, which checks the permit's id, frees it
    /// if it still has it.
    ///
    /// # Errors
    /// [`Error::PermitLost`] when the permit was known lost before
    /// (released by id here, found forgotten by Redis, `lost()` resolved: nothing is sent) or
    /// is found gone (its lease ran out, someone released it by id, Redis forgot it): nobody
    /// else's permit is touched;
    /// [`Error::ShutDown`] when the client's
    /// [`shutdown`](crate::Client::shutdown) released it already (nothing is sent);
    /// [`Error::NotALock`] when a key now holds other data; a
    /// connection error when Redis could not be reached after the retries (the permit
    /// then comes back when its lease runs out).
    ///
    /// # Cancel safety
    /// The release runs to completion in the background if this future is dropped.
    pub async fn release(mut self) -> Result<()> {
        let state = self.state.take().expect("a permit is released once");
        let runtime = state.core.background().clone();
        FinishOnDrop::new(release(state), |_| {}).on(&runtime).await
    }

    /// Keeps the permit taken: nothing is released, now or on drop, and this client stops
    /// watching it. Returns its id, by which any client can release it later; otherwise it
    /// comes back when its lease runs out.
    pub fn forget(mut self) -> String {
        let state = self.state.take().expect("a permit is consumed once");
        // After a shutdown, which released it, there is nothing left to stop watching.
        if state.core.handed_out.take(state.ticket) {
            state.core.holds.release(&state.hold);
        }
        tracing::debug!(semaphore = %state.names.key, permit = %state.hold.id.owner, "permit forgotten");
        state.hold.id.owner.to_string()
    }
}

/// Releases one permit, unless the client's shutdown released it already. The client stops
/// watching it at once, before anything is sent.
fn release(state: PermitState) -> impl Future<Output = Result<()>> + Send + 'static {
    let sending = state.core.handed_out.take(state.ticket).then(|| {
        // Whether it was lost is decided before the release retires it. Past its deadline
        // it is only assumed expired, and the release asks Redis: its lease may have been
        // extended elsewhere. A shutdown that marked it after this guard took its ticket
        // leaves the release to the guard.
        let lost = state
            .hold
            .known_lost()
            .filter(|reason| *reason != LostReason::ShutDown);
        release_one(state.core, state.names, state.id, state.hold, lost)
    });
    async move { sending.ok_or(Error::ShutDown)?.await }
}

/// Releases one permit, found `lost` or not (sent if not): for the guard's own release,
/// and for the client's shutdown, which took the guard off its list.
pub(crate) fn release_one(
    core: Arc<Core>,
    names: Arc<SyncNames>,
    id: [u8; 16],
    hold: Arc<Hold>,
    lost: Option<LostReason>,
) -> impl Future<Output = Result<()>> + Send + 'static {
    core.holds.release(&hold);
    // A shutdown waits for it.
    let tracked = core.track();
    async move {
        let _tracked = tracked;
        if let Some(reason) = lost {
            return Err(lost_from(&names, &hold, reason));
        }
        let outcome = release_id(&core, &names, &id).await;
        let found = outcome.result.inspect_err(|e| {
            if e.is_not_a_lock() {
                // Someone wrote other data over the semaphore: the permit is gone.
                hold.release_found_lost(LostReason::Released);
            }
        })?;
        let reason = match lost_in_release(found, outcome.earlier_may_have_run) {
            None => return Ok(()),
            // Not there past its deadline: its lease ran out.
            Some(LostReason::Released) if Instant::now() >= hold.valid_until() => {
                LostReason::Expired
            }
            Some(reason) => reason,
        };
        hold.release_found_lost(reason);
        Err(lost_from(
            &names,
            &hold,
            hold.lost_reason().unwrap_or(reason),
        ))
    }
}

/// How long the check at a permit's deadline waits for Redis: past it, the permit is taken
/// as expired, as when Redis cannot be reached at all. One try, since every moment past the
/// deadline is one in which the holder may believe in a permit given back.
const CONFIRM_LIMIT: Duration = Duration::from_millis(250);

/// What Redis may show of a permit's own lease, at its local deadline, beyond the drift
/// allowance the deadline kept (twice it) and a margin for the acquire's own trip to Redis:
/// more than that is a lease someone extended.
const EXTENSION_MARGIN: Duration = Duration::from_millis(50);

/// Asks Redis how long the permit `id` has left, once its local deadline passed: moves the
/// deadline to the new expiry if another client extended the lease, and otherwise marks the
/// permit lost (`Expired`), also when Redis cannot be asked within [`CONFIRM_LIMIT`].
async fn confirm_expiry(core: &Core, names: &SyncNames, id: &[u8; 16], hold: &Hold) {
    // A new lease set meanwhile would be undone by a stale answer: one at a time.
    let _changing = hold.lease_change().await;
    if !hold.assumed_expired() {
        return; // a new lease moved the deadline, or another check settled it
    }
    let started = Instant::now();
    let ask = core
        .connections
        .once(|conn| scripts::permit_left(conn, names, id));
    let own_end = drift(hold.lease_ms()) * 2 + EXTENSION_MARGIN;
    match tokio::time::timeout(CONFIRM_LIMIT, ask).await {
        Ok(Ok(Some(left_ms))) if Duration::from_millis(left_ms) > own_end => {
            tracing::debug!(semaphore = %names.key, permit = %hold.id.owner, left_ms, "the permit's lease was extended elsewhere");
            hold.lease_applied(started, Applied::within(left_ms, None, started));
            return;
        }
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::debug!(semaphore = %names.key, error = %e, "cannot ask whether a permit expired; taken as expired");
        }
        Err(_) => {
            tracing::debug!(semaphore = %names.key, "no answer on whether a permit expired; taken as expired");
        }
    }
    hold.mark_lost(LostReason::Expired);
}

/// Sets the lease of the permit `id` of the semaphore `names` to `lease_ms` from now, and
/// moves `hold`'s deadline with it: true when it was taken. Retried after failures to
/// reach Redis: a second run sets the same lease a moment later.
pub(crate) async fn update_lease(
    core: &Core,
    names: &SyncNames,
    id: &[u8; 16],
    lease_ms: u64,
    hold: Option<&Hold>,
) -> Result<bool> {
    let started = Instant::now();
    let outcome = call::run(
        core,
        names,
        "extending a permit of",
        Kind::Idempotent,
        |conn, _| scripts::permit_update(conn, names, id, lease_ms),
    )
    .await;
    let updated = outcome.result?;
    if let (true, Some(hold)) = (updated, hold) {
        hold.set_fixed_lease(lease_ms);
        hold.lease_applied(started, Applied::within(lease_ms, None, started));
    }
    Ok(updated)
}

/// Releases the permit `id` of the semaphore `names`, retried after failures to reach
/// Redis: a second run finds nothing and changes nothing.
pub(crate) async fn release_id(
    core: &Core,
    names: &SyncNames,
    id: &[u8; 16],
) -> Outcome<PermitRelease> {
    call::run(
        core,
        names,
        "releasing a permit of",
        Kind::Idempotent,
        |conn, _| scripts::permit_release(conn, names, id),
    )
    .await
}

/// Why a permit released by its id, which Redis `found` so, was lost; `None` when the
/// release freed it, or when a retry finds nothing after a try that may have run (that
/// try did it: the id is this permit's alone).
pub(crate) fn lost_in_release(
    found: PermitRelease,
    earlier_may_have_run: bool,
) -> Option<LostReason> {
    match found {
        PermitRelease::Released => None,
        PermitRelease::NotFound if earlier_may_have_run => None,
        PermitRelease::Expired => Some(LostReason::Expired),
        PermitRelease::NotFound => Some(LostReason::Released),
    }
}

fn lost_from(names: &SyncNames, hold: &Hold, reason: LostReason) -> Error {
    let expired_ago = Instant::now()
        .checked_duration_since(hold.valid_until())
        .filter(|ago| *ago > Duration::ZERO);
    lost_error(&names.key, &hold.id.owner, reason, expired_ago)
}

/// [`Error::PermitLost`] for the permit `id` of the semaphore `key`.
pub(crate) fn lost_error(
    key: &str,
    id: &str,
    reason: LostReason,
    expired_ago: Option<Duration>,
) -> Error {
    Error::PermitLost {
        semaphore: key.to_string(),
        id: id.to_ascii_lowercase(),
        reason,
        expired_ago,
    }
}

impl Drop for ExpirablePermit {
    fn drop(&mut self) {
        let Some(state) = self.state.take() else {
            return;
        };
        let core = state.core.clone();
        let (key, id) = (state.names.key.clone(), state.hold.id.owner.clone());
        let releasing = release(state);
        core.spawn(async move {
            match releasing.await {
                Ok(()) => tracing::debug!(semaphore = %key, permit = %id, "released in the background"),
                Err(e) if e.is_lock_lost() || e.is_shut_down() => tracing::debug!(semaphore = %key, error = %e, "dropped a lost permit"),
                Err(e) => tracing::warn!(semaphore = %key, permit = %id, error = %e, "background release failed; the permit comes back when its lease runs out"),
            }
        });
    }
}
