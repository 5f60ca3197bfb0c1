//! [`LockGuard`]: one hold of a lock, released by [`LockGuard::unlock`] or on drop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::Either;
use tokio::time::Instant;
use tracing::Instrument;

use crate::client_core::handed_out::Outstanding;
use crate::client_core::Core;
use crate::error::{Error, LostReason, Result};
use crate::holds::{Hold, HoldId};
use crate::locks::release::{Release, Released};
use crate::protocol::names::LockNames;
use crate::util::detach::FinishOnDrop;

/// Proof of one hold on a distributed lock.
///
/// Release it with [`unlock`](LockGuard::unlock), which reports whether the lock was still
/// held. Dropping the guard releases it too, in the background on the client's runtime
/// (`Drop` cannot wait for Redis), wherever it is dropped; if that runtime is gone, the
/// lock expires with its lease.
///
/// The guard remembers its owner (`<client-uuid>:<task-id>`), so it may be moved to, and
/// released from, any task. Guards of reentrant calls by the same task share one lease and
/// one lost signal.
#[must_use = "if unused the lock is released immediately"]
#[clippy::has_significant_drop]
pub struct LockGuard {
    /// `None` once released.
    state: Option<GuardState>,
}

struct GuardState {
    core: Arc<Core>,
    names: Arc<LockNames>,
    hold: Arc<Hold>,
    token: Option<u64>,
    /// Its entry in the client's list of guards (see [`HandedOut`](crate::client_core::handed_out)).
    ticket: u64,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("LockGuard");
        if let Some(state) = &self.state {
            debug
                .field("lock", &state.hold.id.key)
                .field("owner", &state.hold.id.owner)
                .field("lost", &state.hold.lost_reason());
        }
        debug.finish()
    }
}

impl LockGuard {
    pub(crate) fn new(
        core: Arc<Core>,
        names: Arc<LockNames>,
        hold: Arc<Hold>,
        token: Option<u64>,
    ) -> Self {
        let ticket = core.handed_out.list(Outstanding::Lock {
            names: names.clone(),
            hold: hold.clone(),
        });
        LockGuard {
            state: Some(GuardState {
                core,
                names,
                hold,
                token,
                ticket,
            }),
        }
    }

    fn state(&self) -> &GuardState {
        self.state
            .as_ref()
            .expect("a LockGuard holds its state until it is consumed")
    }

    /// The lock's Redis key: the client's key prefix followed by the lock's name.
    pub fn key(&self) -> &str {
        &self.state().hold.id.key
    }

    /// The lock's name, as [`Lock::name`](crate::Lock::name) gives it: its
    /// [`key`](LockGuard::key) without the client's key prefix.
    pub fn name(&self) -> &str {
        let state = self.state();
        let key = &*state.hold.id.key;
        key.strip_prefix(&*state.core.settings.key_prefix)
            .unwrap_or(key)
    }

    /// The hash field this guard's owner holds: `<client-uuid>:<task-id>`.
    pub fn owner(&self) -> &str {
        &self.state().hold.id.owner
    }

    /// The fencing token of this acquire, for a guard of a
    /// [`FencedLock`](crate::FencedLock) (always `Some` there; `None` for other kinds):
    /// strictly greater than every token handed out before for the same lock name. Pass it
    /// with every write to the protected resource, and have the resource refuse a token
    /// lower than one it has seen (see [`Client::fenced_set`](crate::Client::fenced_set)):
    /// a holder that lost the lock while paused cannot then overwrite a later holder's work.
    pub fn fencing_token(&self) -> Option<u64> {
        self.state().token
    }

    /// Whether the watchdog renews this lock (it was taken without a fixed lease).
    pub fn is_renewed_by_watchdog(&self) -> bool {
        self.state().hold.is_watchdog()
    }

    /// The instant until which the lock is certainly still held, on this process's monotonic
    /// clock: the start of the last confirmed acquire or renewal, plus the lease, minus an
    /// allowance for clock drift (1 % of the lease + 2 ms). Renewals push it forward; once
    /// the lock is found lost, it is when that happened at the latest.
    pub fn valid_until(&self) -> std::time::Instant {
        self.state().hold.valid_until().into_std()
    }

    /// Whether the lock is known to be, or must be assumed, lost: its lease passed without a
    /// confirmed renewal, or a renewal found it gone.
    pub fn is_lost(&self) -> bool {
        self.state().hold.lost_reason().is_some()
    }

    /// Why the lock is lost, if it is.
    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        self.state().hold.lost_reason()
    }

    /// Resolves when the lock is lost, with the reason: at the latest when
    /// [`valid_until`](LockGuard::valid_until) passes, and as soon as a renewal finds the
    /// lock gone. Never resolves for a lock that stays held.
    ///
    /// The future does not borrow the guard, so it can race the critical section:
    ///
    /// ```no_run
    /// # async fn demo(guard: redis_rlock::LockGuard) -> redis_rlock::Result<()> {
    /// let lost = guard.lost();
    /// tokio::select! {
    ///     _ = do_the_work() => guard.unlock().await?,
    ///     reason = lost => eprintln!("stopped: {reason}"),
    /// }
    /// # Ok(()) }
    /// # async fn do_the_work() {}
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        let hold = self.state().hold.clone();
        async move { hold.lost().await }
    }

    /// Releases this hold: the lock is freed, and one waiter woken, when it was the owner's
    /// last hold; otherwise the lease is reset and the lock stays held.
    ///
    /// # Errors
    /// [`Error::LockLost`] when the lock was lost before this call (nothing is deleted, and
    /// another owner's lock is never touched); [`Error::ShutDown`]
    /// when the client's [`shutdown`](crate::Client::shutdown) released it already (nothing
    /// is sent); a connection error when Redis could not be reached after the configured
    /// retries (the lock then expires with its lease).
    ///
    /// # Cancel safety
    /// The release runs to completion in the background if this future is dropped.
    pub async fn unlock(mut self) -> Result<()> {
        let state = self.state.take().expect("a guard is released once");
        let runtime = state.core.background().clone();
        let span =
            tracing::debug_span!("unlock", lock = %state.names.key, kind = state.names.kind.label);
        FinishOnDrop::new(release(state).instrument(span), |_| {})
            .on(&runtime)
            .await
    }
}

/// How many extra counts a last release takes back at most (see [`release_leftovers`]).
const MAX_LEFTOVERS: usize = 8;

/// Releases one hold, unless the client's shutdown released it already. The local registry
/// lets go at once, before anything is sent, so the watchdog stops renewing a hold the
/// moment its last guard goes, whatever Redis answers (and even if the returned future
/// never runs).
fn release(state: GuardState) -> impl Future<Output = Result<()>> + Send + 'static {
    let GuardState {
        core,
        names,
        hold,
        ticket,
        ..
    } = state;
    if !core.handed_out.take(ticket) {
        return Either::Right(std::future::ready(Err(Error::ShutDown)));
    }
    // Whether it was lost is decided before the release retires the hold. A shutdown that
    // marked the hold after this guard took its ticket leaves this guard's count to this
    // release.
    let lost = hold
        .lost_reason()
        .filter(|reason| *reason != LostReason::ShutDown);
    // `Either`, not an `async` block awaiting an `Option` of the release: that block would
    // hold the release twice, as its capture and as its awaited future, and be copied at
    // that size into the guard's `FinishOnDrop` on every unlock.
    Either::Left(release_one(core, names, hold, lost))
}

/// Releases one guard's hold, found `lost` or not (sent if not): for the guard's own
/// release, and for the client's shutdown, which took the guard off its list.
pub(crate) fn release_one(
    core: Arc<Core>,
    names: Arc<LockNames>,
    hold: Arc<Hold>,
    lost: Option<LostReason>,
) -> impl Future<Output = Result<()>> + Send + 'static {
    // Before the hold lets go: from then on a new acquire of the owner waits for this
    // release to be answered.
    let releasing = core.holds.release_started(&hold.id);
    let tracked = core.track();
    let last = core.holds.release(&hold);
    if last {
        names.metrics.hold_ended(|| hold.held_for());
    }
    async move {
        // What the release came to, also as a metric label: `freed`, `still_held`, `lost`
        // or `failed`.
        // A labelled block, not an inner `async` block: awaited, that would be built apart
        // and copied whole into this future on every release.
        let (outcome, result) = 'released: {
            if let Some(reason) = lost {
                let error = lost_error(hold.id.key.to_string(), reason, hold.valid_until());
                break 'released ("lost", Err(error));
            }
            let started = Instant::now();
            let applied = hold.lease_at(started);
            let request = Release::new(core.clone(), names.clone(), &hold.id, applied.ms);
            let released = match request.run().await {
                Ok(released) => released,
                Err(e) if e.is_not_a_lock() => {
                    // Someone wrote other data over the lock: it is gone.
                    hold.release_found_lost(LostReason::Released);
                    break 'released ("lost", Err(e));
                }
                Err(e) => break 'released ("failed", Err(e)),
            };
            match released {
                Released::Freed if !last => {
                    // Redis counted fewer holds than this hold has guards: some of its counts
                    // left Redis unseen. The lock is free now, so the guards left must not
                    // stay valid.
                    hold.mark_lost(LostReason::Released);
                    ("freed", Ok(()))
                }
                Released::Freed => ("freed", Ok(())),
                Released::StillHeld if last => {
                    release_leftovers(&core, &names, &hold.id).await;
                    ("freed", Ok(()))
                }
                Released::StillHeld => {
                    // With replica sync on, this lease was not waited for: it does not
                    // count, and the watchdog's next acknowledged renewal moves the validity
                    // on.
                    if core.replica_sync.is_none() {
                        hold.lease_applied(started, applied);
                    }
                    ("still_held", Ok(()))
                }
                Released::NotHeld => {
                    let reason = hold.gone_reason();
                    hold.release_found_lost(reason);
                    let reason = hold.lost_reason().unwrap_or(reason);
                    let error = lost_error(hold.id.key.to_string(), reason, hold.valid_until());
                    ("lost", Err(error))
                }
            }
        };
        drop((releasing, tracked));
        names.metrics.released(outcome);
        result
    }
}

/// Takes back the counts Redis still holds for the owner of `id` once its last guard is
/// released.
///
/// Redis can count more holds than the client has guards: an acquire whose reply was lost
/// ran after all, or the owner took the lock again in the moment between its earlier hold
/// being reported lost (just before the key's expiry) and the expiry, which Redis counted
/// as a re-entry. Left alone, the lock would stay until its lease ran out, renewed by
/// nobody. Each release is owner-checked, so no other owner's lock is touched; and while
/// the owner holds the lock again, or an acquire of its is on its way (whose count may be
/// in Redis before its hold is here), nothing more is taken back: those counts may be its.
///
/// No leftover release runs after a new acquire of the owner: the guard's release is
/// counted as on its way from before it is sent until these are answered, and an acquire
/// counts itself only once no release is, in one step ([`Holds::attempt_started`]). So
/// an acquire counted first stops the check below, and one not yet counted waits for these.
/// Run after the acquire, a leftover release could take its count, should the leftovers
/// have expired meanwhile. An acquire that only waits is not counted: dropped then, it
/// must not keep the leftovers in Redis.
///
/// [`Holds::attempt_started`]: crate::holds::Holds::attempt_started
async fn release_leftovers(core: &Arc<Core>, names: &Arc<LockNames>, id: &HoldId) {
    for _ in 0..MAX_LEFTOVERS {
        if core.holds.is_busy(id) {
            return;
        }
        let release = Release::new(core.clone(), names.clone(), id, 0);
        match release.run().await {
            Ok(Released::StillHeld) => {}
            Ok(_) => return,
            Err(e) => {
                tracing::debug!(lock = %names.key, error = %e, "leftover holds expire with their lease");
                return;
            }
        }
    }
}

/// The error of an unlock of the lock `name`, lost for `reason`, valid until `valid_until`.
pub(crate) fn lost_error(name: String, reason: LostReason, valid_until: Instant) -> Error {
    let expired_ago = Instant::now().checked_duration_since(valid_until);
    Error::LockLost {
        name,
        reason,
        expired_ago: expired_ago.filter(|ago| *ago > Duration::ZERO),
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(state) = self.state.take() else {
            return;
        };
        let core = state.core.clone();
        let key = state.hold.id.key.clone();
        // Stops renewing at once; the release itself runs on the client's runtime.
        let releasing = release(state);
        core.spawn(async move {
            match releasing.await {
                Ok(()) => tracing::debug!(lock = %key, "released in the background"),
                Err(e) if e.is_lock_lost() || e.is_shut_down() => tracing::debug!(lock = %key, error = %e, "dropped a lost guard"),
                Err(e) => tracing::warn!(lock = %key, error = %e, "background release failed; the lock expires with its lease"),
            }
        });
    }
}

crate::locks::distributed::guard_by_inherent_methods!(LockGuard);
