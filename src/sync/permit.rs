//! [`ExpirablePermit`]: one permit of a
//! [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore), with its id and lease,
//! released by [`ExpirablePermit::release`] or on drop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::core::handed_out::Outstanding;
use crate::core::Core;
use crate::error::{Error, LostReason, Result};
use crate::holds::Hold;
use crate::protocol::names::SyncNames;
use crate::protocol::scripts::{self, PermitRelease};
use crate::sync::call::{self, Outcome, Retry};
use crate::util::detach::FinishOnDrop;

/// One permit of a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore).
///
/// It lasts until it is released ([`release`](ExpirablePermit::release), or dropped: then
/// in the background on the client's runtime), released by its id from anywhere
/// ([`PermitExpirableSemaphore::release_by_id`](crate::PermitExpirableSemaphore::release_by_id),
/// Redisson's `release(id)`), or its lease runs out: then any call on the semaphore gives
/// it back. Nothing renews a lease.
///
/// [`lost`](ExpirablePermit::lost) resolves when the permit is lost, before the semaphore
/// can give it to someone else: at [`valid_until`](ExpirablePermit::valid_until) (the
/// acquire's start + the lease − 1 % of the lease − 2 ms, on this process's monotonic
/// clock), and as soon as this client releases it by id or finds, after a reconnection,
/// that Redis forgot it (a restart, a failover). Releasing a lost permit is
/// [`Error::PermitLost`](crate::Error::PermitLost), and never releases anyone else's.
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
    /// Its entry in the client's list of guards (see [`HandedOut`](crate::core::handed_out)).
    ticket: u64,
}

impl std::fmt::Debug for ExpirablePermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("ExpirablePermit");
        if let Some(state) = &self.state {
            debug
                .field("semaphore", &state.names.key)
                .field("id", &state.hold.owner)
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
        &self.state().hold.owner
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
    /// [`Expired`](crate::LostReason::Expired) at
    /// [`valid_until`](ExpirablePermit::valid_until) at the latest, or
    /// [`Released`](crate::LostReason::Released) as soon as this client releases it by id,
    /// or finds after a reconnection that Redis no longer has it. Never resolves for a
    /// permit that stays taken. It does not borrow the permit, so it can race the work.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        let hold = self.state().hold.clone();
        async move { hold.lost().await }
    }

    /// Releases the permit and tells the waiters.
    ///
    /// # Errors
    /// [`Error::PermitLost`](crate::Error::PermitLost) when the permit was lost before
    /// (nothing is sent) or is found gone (its lease ran out, someone released it by id,
    /// Redis forgot it): nobody else's permit is touched;
    /// [`Error::ShutDown`](crate::Error::ShutDown) when the client's
    /// [`shutdown`](crate::Client::shutdown) released it already (nothing is sent);
    /// [`Error::NotALock`](crate::Error::NotALock) when a key now holds other data; a
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
        state.core.handed_out.take(state.ticket);
        state.core.holds.release(&state.hold);
        tracing::debug!(semaphore = %state.names.key, permit = %state.hold.owner, "permit forgotten");
        state.hold.owner.to_string()
    }
}

/// Releases one permit, unless the client's shutdown released it already. The client stops
/// watching it at once, before anything is sent.
fn release(state: PermitState) -> impl Future<Output = Result<()>> + Send + 'static {
    let PermitState {
        core,
        names,
        id,
        hold,
        ticket,
    } = state;
    let sending = core.handed_out.take(ticket).then(|| {
        // Whether it was lost is decided before the release retires it.
        let lost = hold.lost_reason();
        release_one(core, names, id, hold, lost)
    });
    async move {
        match sending {
            Some(sending) => sending.await,
            None => Err(Error::ShutDown),
        }
    }
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
        let reason = match outcome.result {
            Ok(PermitRelease::Released) => return Ok(()),
            // A retry that finds nothing after a try that may have run: that try did it
            // (the id is this permit's alone).
            Ok(PermitRelease::NotFound) if outcome.earlier_may_have_run => return Ok(()),
            Ok(PermitRelease::Expired) => LostReason::Expired,
            Ok(PermitRelease::NotFound) if Instant::now() >= hold.valid_until() => {
                LostReason::Expired
            }
            Ok(PermitRelease::NotFound) => LostReason::Released,
            Err(e) => {
                if e.is_not_a_lock() {
                    // Someone wrote other data over the semaphore: the permit is gone.
                    hold.release_found_lost(LostReason::Released);
                }
                return Err(e);
            }
        };
        hold.release_found_lost(reason);
        Err(lost_from(
            &names,
            &hold,
            hold.lost_reason().unwrap_or(reason),
        ))
    }
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
        Retry::Always,
        |conn| scripts::permit_release(conn, names, id),
    )
    .await
}

fn lost_from(names: &SyncNames, hold: &Hold, reason: LostReason) -> Error {
    let expired_ago = Instant::now()
        .checked_duration_since(hold.valid_until())
        .filter(|ago| *ago > Duration::ZERO);
    lost_error(&names.key, &hold.owner, reason, expired_ago)
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
        let (key, id) = (state.names.key.clone(), state.hold.owner.clone());
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
