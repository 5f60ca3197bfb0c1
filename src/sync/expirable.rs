//! [`PermitExpirableSemaphore`]: Redisson's `RPermitExpirableSemaphore`, whose permits each
//! have an id and a lease.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client_core::Core;
use crate::error::{LostReason, Result};
use crate::holds::{Applied, Hold, Lease, Renewal, Terms};
use crate::locks::wait::Tried;
use crate::protocol::names::{SyncKind, SyncNames};
use crate::protocol::scripts::{self, Change, PermitAcquire, PermitRelease};
use crate::sync::call::{self, Kind};
use crate::sync::check;
use crate::sync::handle::Handle;
use crate::sync::permit::{lost_error, lost_in_release, release_id, update_lease, ExpirablePermit};
use crate::sync::waiting::{wait_until, Try, RECHECK};
use crate::transport::pubsub::Wake;
use crate::util::detach::FinishOnDrop;

/// A distributed semaphore whose permits each have an id and a lease: a permit whose
/// holder dies comes back by itself when its lease runs out. Shared with Redisson's
/// `RPermitExpirableSemaphore` on the same name (3.52 layout).
///
/// Every acquire takes one permit and gives an [`ExpirablePermit`]: its
/// [`id`](ExpirablePermit::id) is what Redis stores (16 random bytes, shown in hex as
/// Redisson shows it), so any client, Rust or Java, can release it by id
/// ([`release_by_id`](PermitExpirableSemaphore::release_by_id), Redisson's
/// `release(id)`); its [`lost`](ExpirablePermit::lost) says when the lease ran out or the
/// permit was released elsewhere. The layout, messages and waiting bounds are in the
/// [`sync`](crate::sync) docs.
///
/// Cheap to clone; made by
/// [`Client::permit_expirable_semaphore`](crate::Client::permit_expirable_semaphore).
///
/// ```no_run
/// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
/// use std::time::Duration;
/// let gpus = client.permit_expirable_semaphore("gpu");
/// gpus.try_set_permits(4).await?;
/// let permit = gpus.acquire(Duration::from_secs(60)).await?;
/// tokio::select! {
///     _ = train() => permit.release().await?,
///     reason = permit.lost() => eprintln!("gave the GPU up: {reason}"),
/// }
/// # Ok(()) }
/// # async fn train() {}
/// ```
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    handle: Handle,
}

impl std::fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.handle.debug("PermitExpirableSemaphore", f)
    }
}

impl PermitExpirableSemaphore {
    pub(crate) fn new(core: Arc<Core>, name: &str) -> Self {
        PermitExpirableSemaphore {
            handle: Handle::new(
                core,
                SyncKind::ExpirableSemaphore,
                "expirable semaphore",
                name,
            ),
        }
    }

    /// The semaphore's name, as given to
    /// [`Client::permit_expirable_semaphore`](crate::Client::permit_expirable_semaphore)
    /// (without the key prefix).
    pub fn name(&self) -> &str {
        &self.handle.name
    }

    /// Sets the number of free permits, if the semaphore has none set yet: true when set,
    /// false when a count was there already (nothing changed). 0 is allowed (a closed
    /// gate). Waiters are told.
    ///
    /// # Errors
    /// As [`Semaphore::try_set_permits`](crate::Semaphore::try_set_permits).
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the count may or may not have been set.
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn try_set_permits(&self, permits: u64) -> Result<bool> {
        self.handle.try_set_permits(permits).await
    }

    /// Adds `permits` free permits (negative: takes that many away, as Redisson's
    /// `addPermits` does), and tells the waiters when it added some.
    ///
    /// # Errors
    /// As [`Semaphore::add_permits`](crate::Semaphore::add_permits).
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the permits may or may not have been added.
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn add_permits(&self, permits: i64) -> Result<()> {
        self.handle.add_permits(permits, Change::AddExpirable).await
    }

    /// Takes one permit with a `lease`, waiting as long as it takes for one to be free.
    /// The permit comes back when released, dropped, or when its lease runs out, whatever
    /// its holder does.
    ///
    /// Waiting never polls: the waiter subscribes to the semaphore's channel and tries
    /// again when a permit is given back; when the nearest taken permit expires (no
    /// message announces that); and at least every [`RECHECK`] (5 s).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an invalid name or a
    /// lease under 10 ms or over ten years (nothing sent);
    /// [`Error::NotALock`](crate::Error::NotALock) when a key holds other data; a
    /// connection error when Redis cannot be reached after the configured retries (a try
    /// whose reply was lost is undone by its id before the next);
    /// [`Error::Timeout`](crate::Error::Timeout) when the subscription cannot be made.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves no subscription behind, and a permit it took in
    /// its last moment is released at once.
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn acquire(&self, lease: Duration) -> Result<ExpirablePermit> {
        let taken = self.take(lease, None).await?;
        Ok(taken.expect("a wait without a deadline ends with a permit or an error"))
    }

    /// One try, no waiting: a permit with `lease`, or `Ok(None)` when none is free.
    ///
    /// # Errors
    /// As [`acquire`](PermitExpirableSemaphore::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](PermitExpirableSemaphore::acquire).
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn try_acquire(&self, lease: Duration) -> Result<Option<ExpirablePermit>> {
        self.take(lease, Some(Duration::ZERO)).await
    }

    /// Waits up to `wait` for a permit with `lease` (Redisson's `tryAcquire(wait, lease)`):
    /// `Ok(None)` if none was free all that time. A `wait` too large to add to the clock
    /// waits without bound.
    ///
    /// # Errors
    /// As [`acquire`](PermitExpirableSemaphore::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](PermitExpirableSemaphore::acquire).
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn try_acquire_for(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<ExpirablePermit>> {
        self.take(lease, Some(wait)).await
    }

    async fn take(
        &self,
        lease: Duration,
        wait: Option<Duration>,
    ) -> Result<Option<ExpirablePermit>> {
        let lease_ms = check::lease(lease)?;
        wait_until(&self.handle, Wake::Permits, TakePermit { lease_ms }, wait).await
    }

    /// Releases the permit `id` (32 hex digits, as [`ExpirablePermit::id`] and Redisson
    /// show it), taken by any client, Rust or Java: true when it was taken and its lease
    /// had not run out (Redisson's `tryRelease(id)`). False when it is not taken (released
    /// already, given back after its lease, never taken); a permit whose lease ran out but
    /// that nobody gave back yet is given back now, and answers false, as in Redisson.
    ///
    /// A guard of this client on the permit reports it lost
    /// ([`LostReason::Released`]) when it is released.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an invalid name or an
    /// id that is not 32 hex digits (nothing sent);
    /// [`Error::NotALock`](crate::Error::NotALock) when a key holds other data; a
    /// connection error (retried: releasing one id twice releases it once).
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the permit may or may not have been released.
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn try_release(&self, id: &str) -> Result<bool> {
        let (found, _) = self.release_told(id).await?;
        Ok(found == PermitRelease::Released)
    }

    /// Releases the permit `id` (Redisson's `release(id)`), as
    /// [`try_release`](PermitExpirableSemaphore::try_release) does, and fails when it was
    /// not taken.
    ///
    /// # Errors
    /// [`Error::PermitLost`](crate::Error::PermitLost) when the permit was not taken
    /// ([`Released`](crate::LostReason::Released): released, given back, never taken) or
    /// its lease had run out ([`Expired`](crate::LostReason::Expired)); otherwise as
    /// [`try_release`](PermitExpirableSemaphore::try_release).
    ///
    /// # Cancel safety
    /// As [`try_release`](PermitExpirableSemaphore::try_release).
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn release_by_id(&self, id: &str) -> Result<()> {
        let (found, earlier_may_have_run) = self.release_told(id).await?;
        match lost_in_release(found, earlier_may_have_run) {
            None => Ok(()),
            Some(reason) => Err(lost_error(&self.handle.names()?.key, id, reason, None)),
        }
    }

    /// Sets the lease of the permit `id` (32 hex digits), taken by any client, Rust or Java,
    /// anew: `lease` from now (Redisson's `updateLeaseTime(id, lease)`). True when the
    /// permit was taken; false when it is not (released, given back after its lease, never
    /// taken): a permit whose lease ran out is given back first, not revived, as in
    /// Redisson. A guard of this client on the permit moves its
    /// [`valid_until`](ExpirablePermit::valid_until) with it.
    ///
    /// A guard whose deadline passed asks Redis before it reports the permit lost, so a
    /// lease extended here (or by a Java client) is kept by its holder, and its release
    /// frees it.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_rlock::Client, id: String) -> redis_rlock::Result<()> {
    /// use std::time::Duration;
    /// let gpus = client.permit_expirable_semaphore("gpu");
    /// if !gpus.update_lease_time(&id, Duration::from_secs(600)).await? {
    ///     eprintln!("permit {id} is not taken any more");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an invalid name, an id
    /// that is not 32 hex digits, or a lease under 10 ms or over ten years (nothing sent);
    /// [`Error::NotALock`](crate::Error::NotALock) when a key holds other data; a
    /// connection error (retried: a new lease set twice is the same lease, a moment later).
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the lease may or may not have been set.
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn update_lease_time(&self, id: &str, lease: Duration) -> Result<bool> {
        let bytes = check::permit_id(id)?;
        let lease_ms = check::lease(lease)?;
        let (core, names) = self.handle.parts().await?;
        // A guard of this client on the permit: its expiry checks wait for the new lease.
        let local = local_permit(core, names, id);
        let _changing = match &local {
            Some(hold) => hold.lease_change().await,
            None => None,
        };
        update_lease(core, names, &bytes, lease_ms, local.as_deref()).await
    }

    /// Releases the permit `id` (see [`try_release`](PermitExpirableSemaphore::try_release)):
    /// what Redis found of it, and whether an earlier try may have run. A permit of this
    /// client released so: its guard reports it lost at once.
    async fn release_told(&self, id: &str) -> Result<(PermitRelease, bool)> {
        let bytes = check::permit_id(id)?;
        let (core, names) = self.handle.parts().await?;
        let outcome = release_id(core, names, &bytes).await;
        let found = outcome.result?;
        if found == PermitRelease::Released {
            if let Some(hold) = local_permit(core, names, id) {
                hold.mark_lost(LostReason::Released);
            }
        }
        Ok((found, outcome.earlier_may_have_run))
    }

    /// How many permits are free, after giving back those whose lease ran out.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an invalid name;
    /// [`Error::NotALock`](crate::Error::NotALock) when a key holds other data; a
    /// connection error.
    ///
    /// # Cancel safety
    /// Cancel safe: it may give back expired permits, which any call does.
    pub async fn available_permits(&self) -> Result<u64> {
        self.count(false).await
    }

    /// How many permits are taken (by anyone), after giving back those whose lease ran
    /// out.
    ///
    /// # Errors
    /// As [`available_permits`](PermitExpirableSemaphore::available_permits).
    ///
    /// # Cancel safety
    /// As [`available_permits`](PermitExpirableSemaphore::available_permits).
    pub async fn acquired_permits(&self) -> Result<u64> {
        self.count(true).await
    }

    async fn count(&self, acquired: bool) -> Result<u64> {
        let count = self
            .handle
            .call("reading", Kind::Idempotent, |conn, names, _| {
                scripts::permit_count(conn, names, acquired)
            })
            .await?;
        Ok(count.max(0).unsigned_abs())
    }

    /// Deletes the semaphore: its count and its taken permits. True when something was
    /// there. Guards on its permits find them gone when they release them.
    ///
    /// # Errors
    /// As [`available_permits`](PermitExpirableSemaphore::available_permits).
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the semaphore may or may not have been deleted.
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn delete(&self) -> Result<bool> {
        self.handle.delete().await
    }
}

/// This client's guard on the permit `id` of `names`, unless it is known lost: past its
/// deadline it is only assumed expired, and still counts.
fn local_permit(core: &Core, names: &SyncNames, id: &str) -> Option<Arc<Hold>> {
    let timeouts = names.timeouts.as_ref()?;
    let holds = &core.holds;
    holds.not_known_lost(&holds.id(timeouts, &Arc::from(id.to_ascii_lowercase())))
}

/// One try at taking a permit, as the waiting loop drives it: a new id each time.
struct TakePermit {
    lease_ms: u64,
}

impl Try for TakePermit {
    type Output = ExpirablePermit;

    async fn try_once(
        &mut self,
        core: &Arc<Core>,
        names: &Arc<SyncNames>,
    ) -> Result<Tried<ExpirablePermit>> {
        let lease_ms = self.lease_ms;
        let id: [u8; 16] = rand::random();
        // Set when the call goes out, once the connection is there.
        let mut started = None;
        let (sent_names, orphan_core, orphan_names) = (names.clone(), core.clone(), names.clone());
        let taken = call::once(core, names, "acquiring a permit of", |conn| {
            started = Some(Instant::now());
            let call =
                async move { scripts::permit_acquire(conn, &sent_names, lease_ms, &id).await };
            // The script call finishes if the caller leaves; a permit it took for nobody
            // is released at once.
            FinishOnDrop::new(call, move |outcome| {
                if let Ok(PermitAcquire::Acquired) = outcome {
                    orphan_core.spawn(release_quietly(orphan_core.clone(), orphan_names, id));
                }
            })
            .on(core.background())
        })
        .await;
        match taken {
            Ok(PermitAcquire::Acquired) => {
                let started = started.expect("an answer comes from a call that went out");
                let hex = check::hex(&id);
                let timeouts = names
                    .timeouts
                    .clone()
                    .expect("an expirable semaphore has its timeouts key");
                let holds = &core.holds;
                let terms = Terms {
                    lease: Lease::Fixed(lease_ms),
                    max_until: None,
                };
                let applied = Applied::within(lease_ms, None, started);
                let hold = holds.add(
                    &holds.id(&timeouts, &hex.into()),
                    Renewal::Permit,
                    terms,
                    started,
                    applied,
                    None,
                    &names.metrics,
                );
                // After a reconnection, a permit that Redis forgot is reported lost.
                core.lease_check.ensure_running();
                tracing::debug!(semaphore = %names.key, permit = %hold.id.owner, "acquired");
                Ok(Tried::Acquired(ExpirablePermit::new(
                    core.clone(),
                    names.clone(),
                    id,
                    hold,
                )))
            }
            Ok(PermitAcquire::Busy(nearest)) => {
                Ok(Tried::Busy(Some(nearest.map_or(RECHECK, |ms| {
                    Duration::from_millis(ms).min(RECHECK)
                }))))
            }
            Err(e) => {
                if started.is_some() && e.may_have_run() {
                    // The permit may be taken: released by its id (which nobody else has)
                    // before the next try. Awaited, so that it is sent before that try on
                    // the same connection.
                    let releasing = release_quietly(core.clone(), names.clone(), id);
                    FinishOnDrop::new(releasing, |()| {})
                        .on(core.background())
                        .await;
                }
                Err(e)
            }
        }
    }
}

/// Releases the permit `id` that a try may have taken for nobody; a failure leaves it to
/// its lease.
async fn release_quietly(core: Arc<Core>, names: Arc<SyncNames>, id: [u8; 16]) {
    let _ = release_id(&core, &names, &id).await;
}
