//! [`Hold`]: one owner's holds on one lock, shared by that owner's reentrant guards, with
//! its validity deadline and its lost signal.
//!
//! A hold keeps a local validity deadline on the monotonic clock: the start of the last
//! confirmed acquire or renewal, plus the lease, minus a clock-drift allowance. Past it
//! the lock may already have expired in Redis, so the guard must assume it lost.

use crate::util::lock_metrics::LockMetrics;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::sync::Notify;
use tokio::time::Instant;

use super::lease::{drift, Applied, Lease, Terms};
use super::registry::HoldId;
use super::watch_list::NOT_LISTED;
use crate::error::LostReason;
use crate::util::time::{from_nanos, to_nanos};

/// How the watchdog renews a hold: which script, with which keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// The lock's key, if the owner's field is still there (`renew.lua`).
    Key,
    /// A read-write lock's hold: the hash, never shortening the lease other holders gave
    /// it, and for a read hold also its timeout keys, whose common prefix this is
    /// (`rw_renew.lua`).
    ReadWrite {
        /// `{<key>}:<owner>:rwlock_timeout` for a read hold; `None` for a write hold.
        read_timeouts: Option<Arc<str>>,
    },
    /// An expirable permit: never renewed here, but another client (Redisson's
    /// `updateLeaseTime` too) may extend its lease, so its passed deadline is only an
    /// assumption until Redis confirms it (see [`Hold::assumed_expired`]).
    Permit,
}

/// One owner's holds on one lock, shared by all of that owner's live guards.
#[derive(Debug)]
pub(crate) struct Hold {
    /// Its lock key and owner, the key of its registry entry: kept whole, as every release
    /// looks the entry up.
    pub(crate) id: HoldId,
    /// How the watchdog renews it.
    pub(crate) renewal: Renewal,
    /// Live guards; the hold leaves the registry when this reaches zero.
    pub(super) guards: AtomicU32,
    lease_ms: AtomicU64,
    watchdog: AtomicBool,
    valid_until: AtomicU64,
    /// The end of the maximum hold time (nanoseconds, see [`to_nanos`]; `u64::MAX`: none):
    /// no lease applied to the key reaches past it.
    max_until: AtomicU64,
    /// The last lease applied was cut short by the maximum hold time, so the validity
    /// deadline is the end of the hold, not a renewal that failed to come.
    capped: AtomicBool,
    /// Set while a renewal was sent and not confirmed, to name the reason if the deadline
    /// passes meanwhile: Redis did not answer in time, rather than nobody asked it (a
    /// paused process).
    renewal_unconfirmed: AtomicBool,
    /// Why the hold was lost, set once. A `OnceLock` and a `Notify` rather than a watch
    /// channel: every acquire makes a hold, and a channel is an allocation, a lock per read
    /// and eight notifiers to wake when dropped.
    lost: OnceLock<LostReason>,
    /// Told when `lost` is set.
    lost_set: Notify,
    /// Set when the last guard was released: the deadline no longer means anything, and
    /// `lost()` stays pending.
    pub(super) retired: AtomicBool,
    /// Its slot in the watchdog's [`WatchList`](super::watch_list::WatchList), or
    /// [`NOT_LISTED`]; only the list reads or sets it.
    pub(super) watch_slot: AtomicUsize,
    /// When its first acquire was sent.
    started: Instant,
    /// Still counted in the held-locks gauge: until it is lost or its last guard goes.
    counted: AtomicBool,
    /// An expirable permit's: held while its lease is set anew or its expiry confirmed
    /// with Redis, so that neither acts on what the other is changing. `None` for locks.
    lease_change: Option<Box<tokio::sync::Mutex<()>>>,
    /// The held-locks gauge and lost-locks counter of its lock's class.
    metrics: LockMetrics,
}

impl Drop for Hold {
    fn drop(&mut self) {
        // A hold dropped without a last release or a loss (its runtime went away).
        self.uncount();
    }
}

impl Hold {
    pub(super) fn new(
        id: HoldId,
        renewal: Renewal,
        terms: Terms,
        started: Instant,
        applied: Applied,
        metrics: &LockMetrics,
    ) -> Self {
        let lease_change =
            (renewal == Renewal::Permit).then(|| Box::new(tokio::sync::Mutex::new(())));
        metrics.held(1.0);
        Hold {
            id,
            renewal,
            guards: AtomicU32::new(1),
            lease_ms: AtomicU64::new(terms.lease.millis()),
            watchdog: AtomicBool::new(matches!(terms.lease, Lease::Watchdog(_))),
            valid_until: AtomicU64::new(to_nanos(applied.deadline(started))),
            max_until: AtomicU64::new(terms.max_until.map_or(u64::MAX, to_nanos)),
            capped: AtomicBool::new(applied.capped),
            renewal_unconfirmed: AtomicBool::new(false),
            lost: OnceLock::new(),
            lost_set: Notify::new(),
            retired: AtomicBool::new(false),
            watch_slot: AtomicUsize::new(NOT_LISTED),
            started,
            counted: AtomicBool::new(true),
            lease_change,
            metrics: metrics.clone(),
        }
    }

    /// How long since its first acquire was sent.
    pub(crate) fn held_for(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    /// Leaves the held-locks gauge, once: the hold was lost or its last guard went.
    pub(super) fn uncount(&self) {
        if self.counted.swap(false, Ordering::AcqRel) {
            self.metrics.held(-1.0);
        }
    }

    /// The lease every PEXPIRE of this hold applies: the watchdog's while the watchdog keeps
    /// it, so that a nested fixed-lease call cannot shorten a lock the watchdog promised to
    /// keep; otherwise the most recent fixed lease, as in Redisson.
    pub(crate) fn lease_ms(&self) -> u64 {
        self.lease_ms.load(Ordering::Relaxed)
    }

    /// Serialises a permit's lease changes and expiry checks (see `lease_change`); for a
    /// lock, nothing to wait for.
    pub(crate) async fn lease_change(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        Some(self.lease_change.as_ref()?.lock().await)
    }

    /// A fixed-lease hold (an expirable permit's) was given a new lease of `lease_ms`.
    pub(crate) fn set_fixed_lease(&self, lease_ms: u64) {
        if !self.is_watchdog() {
            self.lease_ms.store(lease_ms, Ordering::Relaxed);
        }
    }

    /// Whether the watchdog keeps it: set by any of its acquires without a fixed lease.
    pub(crate) fn is_watchdog(&self) -> bool {
        self.watchdog.load(Ordering::Relaxed)
    }

    /// The end of the maximum hold time, if one was set.
    pub(super) fn max_until(&self) -> Option<Instant> {
        let nanos = self.max_until.load(Ordering::Relaxed);
        (nanos != u64::MAX).then(|| from_nanos(nanos))
    }

    /// The lease a request sent at `at` should apply: the hold's own, cut short by the
    /// maximum hold time.
    pub(crate) fn lease_at(&self, at: Instant) -> Applied {
        Applied::within(self.lease_ms(), self.max_until(), at)
    }

    /// Local validity after an acquire or unlock that applied `applied`, sent at `started`.
    fn reset_validity(&self, started: Instant, applied: Applied) {
        self.capped.store(applied.capped, Ordering::Relaxed);
        self.valid_until
            .store(to_nanos(applied.deadline(started)), Ordering::Release);
    }

    /// Local validity after a renewal sent at `started`, applying `applied`, was confirmed.
    /// Renewals and reentrant calls of a watchdog hold all apply the same lease (or, near
    /// the maximum hold time, leases that end at that same moment), so the latest start
    /// bounds the expiry in Redis from below whatever order they ran in.
    ///
    /// The deadline never passes the end of the maximum hold time, even for a renewal whose
    /// lease was reckoned before a re-entry brought the cap forward; and it never moves
    /// once the hold is lost (a renewal confirmed after the deadline passed does not revive
    /// a guard that was already reported lost).
    pub(crate) fn renewed(&self, started: Instant, applied: Applied) {
        self.renewal_unconfirmed.store(false, Ordering::Relaxed);
        if applied.capped {
            self.capped.store(true, Ordering::Relaxed);
        }
        if self.lost_mark().is_some() {
            return;
        }
        let mut deadline = applied.deadline(started);
        if let Some(cap) = self.max_until() {
            if deadline > cap {
                deadline = cap.checked_sub(drift(applied.ms)).unwrap_or(cap);
                self.capped.store(true, Ordering::Relaxed);
            }
        }
        self.valid_until
            .fetch_max(to_nanos(deadline), Ordering::AcqRel);
        // Lost meanwhile: `mark_lost` may have lowered the deadline before the raise above.
        if self.lost_mark().is_some() {
            self.valid_until
                .fetch_min(to_nanos(Instant::now()), Ordering::AcqRel);
        }
    }

    /// The watchdog found nothing left of the maximum hold time to renew: the hold ends
    /// when its last lease runs out.
    pub(crate) fn max_hold_reached(&self) {
        self.capped.store(true, Ordering::Relaxed);
    }

    /// Brings the validity deadline forward to what a lease of `lease_ms` applied at
    /// `started` allows, if that is sooner: an acquire of the same owner that the hold did
    /// not ask for (one abandoned by its caller) reset the key's TTL to its own lease.
    pub(crate) fn cap_validity(&self, started: Instant, applied: Applied) {
        self.valid_until
            .fetch_min(to_nanos(applied.deadline(started)), Ordering::AcqRel);
    }

    /// Its live guards: as many holds as Redis counts for its owner, short of the releases
    /// on their way (a release tells its script the count it expects, see
    /// `locks::release`).
    pub(crate) fn guard_count(&self) -> u32 {
        self.guards.load(Ordering::Acquire)
    }

    /// True once every guard of the hold was released or dropped.
    pub(crate) fn is_released(&self) -> bool {
        self.guards.load(Ordering::Acquire) == 0
    }

    /// A renewal of this hold was sent; until it is confirmed, a passed deadline counts as
    /// [`LostReason::ConnectionLost`].
    pub(crate) fn renewal_sent(&self) {
        self.renewal_unconfirmed.store(true, Ordering::Relaxed);
    }

    /// The instant after which the lock must be assumed lost.
    pub(crate) fn valid_until(&self) -> Instant {
        from_nanos(self.valid_until.load(Ordering::Acquire))
    }

    /// Marks the hold lost, once; returns whether this call did it. The validity deadline
    /// ends then at the latest: a lock known lost is not valid until a later deadline.
    pub(crate) fn mark_lost(&self, reason: LostReason) -> bool {
        !self.retired.load(Ordering::Acquire) && self.release_found_lost(reason)
    }

    /// Marks the hold lost when its own release found the lock gone: the hold is retired
    /// by then, but the loss happened before, and a `lost()` future taken earlier must
    /// resolve rather than wait forever.
    pub(crate) fn release_found_lost(&self, reason: LostReason) -> bool {
        let marked = self.lost.set(reason).is_ok();
        if marked {
            self.valid_until
                .fetch_min(to_nanos(Instant::now()), Ordering::AcqRel);
            // Counted before anyone awaiting `lost()` is told, who may read the metrics. A
            // shutdown's release is no loss to alert on: every deploy makes them.
            if reason != LostReason::ShutDown {
                self.metrics.lost(reason.label());
            }
            self.uncount();
            self.lost_set.notify_waiters();
            tracing::warn!(lock = %self.id.key, owner = %self.id.owner, %reason, "lock lost");
        }
        marked
    }

    /// Redis answered that the owner's field is gone: the hold is lost, as
    /// [`LostReason::Expired`] if its lease had run out locally too, otherwise as
    /// [`LostReason::Released`] (someone removed it, or Redis forgot it). Nothing to report
    /// for a hold already released.
    pub(crate) fn found_gone(&self) {
        if !self.is_released() {
            self.mark_lost(self.gone_reason());
        }
    }

    /// Why the hold is lost when Redis no longer has its owner's field: see
    /// [`found_gone`](Hold::found_gone).
    pub(crate) fn gone_reason(&self) -> LostReason {
        if Instant::now() >= self.valid_until() {
            LostReason::Expired
        } else {
            LostReason::Released
        }
    }

    /// Why the hold was marked lost, if it was (the deadline unchecked).
    fn lost_mark(&self) -> Option<LostReason> {
        self.lost.get().copied()
    }

    /// Why the hold is known lost: marked so, or for any hold but a permit's, past its
    /// deadline. A permit past its deadline is only assumed expired (see
    /// [`assumed_expired`](Hold::assumed_expired)): its release still asks Redis.
    pub(crate) fn known_lost(&self) -> Option<LostReason> {
        self.lost_reason().filter(|_| !self.assumed_expired())
    }

    /// A permit past its deadline that nobody confirmed expired: its lease may have been
    /// extended elsewhere. [`lost_reason`](Hold::lost_reason) says `Expired` meanwhile, and
    /// [`lost`](Hold::lost) resolves; the caller asks Redis, then marks it lost or moves the
    /// deadline ([`lease_applied`](Hold::lease_applied)).
    pub(crate) fn assumed_expired(&self) -> bool {
        self.renewal == Renewal::Permit
            && self.lost_mark().is_none()
            && !self.retired.load(Ordering::Acquire)
            && Instant::now() >= self.valid_until()
    }

    /// Why the hold is lost, checking the validity deadline first.
    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        self.lost_reason_at(Instant::now())
    }

    /// [`lost_reason`](Hold::lost_reason) with the clock read once by the caller: the
    /// watchdog checks a whole batch at one instant.
    pub(super) fn lost_reason_at(&self, now: Instant) -> Option<LostReason> {
        let unmarked = self.lost_mark().is_none();
        if unmarked && !self.retired.load(Ordering::Acquire) && now >= self.valid_until() {
            if self.renewal == Renewal::Permit {
                // Assumed, not marked: Redis may say the lease was extended.
                return Some(LostReason::Expired);
            }
            self.mark_lost(self.reason_for_deadline());
        }
        self.lost_mark()
    }

    fn reason_for_deadline(&self) -> LostReason {
        if self.capped.load(Ordering::Relaxed) {
            LostReason::MaxHoldReached
        } else if self.renewal_unconfirmed.load(Ordering::Relaxed) {
            LostReason::ConnectionLost
        } else {
            LostReason::Expired
        }
    }

    /// Resolves when the hold is lost, at the latest when its validity deadline passes.
    pub(crate) async fn lost(&self) -> LostReason {
        loop {
            // Made before the check: it hears a `mark_lost` that comes after, even unpolled.
            let marked = self.lost_set.notified();
            if let Some(reason) = self.lost_reason() {
                return reason;
            }
            if self.retired.load(Ordering::Acquire) {
                // Released: the deadline means nothing any more, and only the release
                // itself, finding the lock gone, can still mark it lost.
                marked.await;
                continue;
            }
            tokio::select! {
                _ = marked => {}
                _ = tokio::time::sleep_until(self.valid_until()) => {}
            }
        }
    }

    pub(super) fn add_guard(&self, terms: Terms, started: Instant, applied: Applied) {
        self.guards.fetch_add(1, Ordering::AcqRel);
        if let Lease::Watchdog(ms) = terms.lease {
            self.lease_ms.store(ms, Ordering::Relaxed);
            self.watchdog.store(true, Ordering::Relaxed);
        } else if !self.is_watchdog() {
            self.lease_ms.store(terms.lease.millis(), Ordering::Relaxed);
        }
        if let Some(cap) = terms.max_until {
            self.max_until.fetch_min(to_nanos(cap), Ordering::Relaxed);
        }
        // Stored, not maxed: the script just set the key's expiry to this lease, which may be
        // shorter than what an earlier fixed lease promised.
        self.reset_validity(started, applied);
    }

    /// Local validity after an acquire or a reentrant unlock, sent at `started`, applied
    /// `applied` (from [`lease_at`](Hold::lease_at)); for a permit, after a new lease, or
    /// Redis's answer of the time it has left. Nothing moves once the hold is marked lost.
    pub(crate) fn lease_applied(&self, started: Instant, applied: Applied) {
        if self.is_watchdog() {
            self.renewed(started, applied);
        } else if self.lost_mark().is_none() {
            self.reset_validity(started, applied);
        }
    }
}
