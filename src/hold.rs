//! What this client holds: one [`Hold`] per (lock key, owner), shared by that owner's
//! reentrant guards, and the registry the watchdog renews from.
//!
//! A hold keeps a local validity deadline on the monotonic clock: the start of the last
//! confirmed acquire or renewal, plus the lease, minus a clock-drift allowance. Past it
//! the lock may already have expired in Redis, so the guard must assume it lost.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::LostReason;

/// Origin of the nanosecond offsets stored in atomics.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn to_nanos(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(*EPOCH).as_nanos()).unwrap_or(u64::MAX)
}

fn from_nanos(nanos: u64) -> Instant {
    *EPOCH + Duration::from_nanos(nanos)
}

/// The allowance for the Redis server's clock running faster than ours, as in the Redlock
/// algorithm: 1 % of the lease plus 2 ms.
pub(crate) fn drift(lease_ms: u64) -> Duration {
    Duration::from_millis(lease_ms / 100 + 2)
}

/// How a hold's lease is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lease {
    /// Renewed by the watchdog with the client's watchdog timeout.
    Watchdog(u64),
    /// A fixed lease in milliseconds, never renewed.
    Fixed(u64),
}

impl Lease {
    pub(crate) fn millis(self) -> u64 {
        match self {
            Lease::Watchdog(ms) | Lease::Fixed(ms) => ms,
        }
    }
}

/// One owner's holds on one lock, shared by all of that owner's live guards.
#[derive(Debug)]
pub(crate) struct Hold {
    pub(crate) key: Arc<str>,
    pub(crate) owner: Arc<str>,
    /// Live guards; the hold leaves the registry when this reaches zero.
    guards: AtomicU32,
    lease_ms: AtomicU64,
    watchdog: AtomicBool,
    valid_until: AtomicU64,
    /// Set while a renewal was sent and not confirmed, to name the reason if the deadline
    /// passes meanwhile: Redis did not answer in time, rather than nobody asked it (a
    /// paused process).
    renewal_unconfirmed: AtomicBool,
    lost: watch::Sender<Option<LostReason>>,
    /// Set when the last guard was released: the deadline no longer means anything, and
    /// `lost()` stays pending.
    retired: AtomicBool,
}

impl Hold {
    fn new(key: Arc<str>, owner: Arc<str>, lease: Lease, started: Instant) -> Self {
        let hold = Hold {
            key,
            owner,
            guards: AtomicU32::new(1),
            lease_ms: AtomicU64::new(lease.millis()),
            watchdog: AtomicBool::new(matches!(lease, Lease::Watchdog(_))),
            valid_until: AtomicU64::new(0),
            renewal_unconfirmed: AtomicBool::new(false),
            lost: watch::Sender::new(None),
            retired: AtomicBool::new(false),
        };
        hold.reset_validity(started, lease.millis());
        hold
    }

    /// The lease every PEXPIRE of this hold applies: the watchdog's while the watchdog keeps
    /// it, so that a nested fixed-lease call cannot shorten a lock the watchdog promised to
    /// keep; otherwise the most recent fixed lease, as in Redisson.
    pub(crate) fn lease_ms(&self) -> u64 {
        self.lease_ms.load(Ordering::Relaxed)
    }

    pub(crate) fn is_watchdog(&self) -> bool {
        self.watchdog.load(Ordering::Relaxed)
    }

    /// Local validity after an acquire or unlock that set the lease to `lease_ms`, sent at
    /// `started`.
    pub(crate) fn reset_validity(&self, started: Instant, lease_ms: u64) {
        let until = started + Duration::from_millis(lease_ms).saturating_sub(drift(lease_ms));
        self.valid_until.store(to_nanos(until), Ordering::Release);
    }

    /// Local validity after a renewal sent at `started` was confirmed. Renewals and
    /// reentrant calls of a watchdog hold all apply the same lease, so the latest start
    /// bounds the expiry in Redis from below whatever order they ran in.
    pub(crate) fn renewed(&self, started: Instant) {
        self.renewal_unconfirmed.store(false, Ordering::Relaxed);
        let lease_ms = self.lease_ms();
        let until = started + Duration::from_millis(lease_ms).saturating_sub(drift(lease_ms));
        self.valid_until
            .fetch_max(to_nanos(until), Ordering::AcqRel);
    }

    /// Brings the validity deadline forward to what a lease of `lease_ms` applied at
    /// `started` allows, if that is sooner: an acquire of the same owner that the hold did
    /// not ask for (one abandoned by its caller) reset the key's TTL to its own lease.
    pub(crate) fn cap_validity(&self, started: Instant, lease_ms: u64) {
        let until = started + Duration::from_millis(lease_ms).saturating_sub(drift(lease_ms));
        self.valid_until
            .fetch_min(to_nanos(until), Ordering::AcqRel);
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

    /// Marks the hold lost, once; returns whether this call did it.
    pub(crate) fn mark_lost(&self, reason: LostReason) -> bool {
        if self.retired.load(Ordering::Acquire) {
            return false;
        }
        let marked = self.lost.send_if_modified(|lost| {
            if lost.is_some() {
                return false;
            }
            *lost = Some(reason);
            true
        });
        if marked {
            tracing::warn!(lock = %self.key, owner = %self.owner, %reason, "lock lost");
        }
        marked
    }

    /// Why the hold is lost, checking the validity deadline first.
    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        if let Some(reason) = *self.lost.borrow() {
            return Some(reason);
        }
        if !self.retired.load(Ordering::Acquire) && Instant::now() >= self.valid_until() {
            self.mark_lost(self.reason_for_deadline());
        }
        *self.lost.borrow()
    }

    fn reason_for_deadline(&self) -> LostReason {
        if self.renewal_unconfirmed.load(Ordering::Relaxed) {
            LostReason::ConnectionLost
        } else {
            LostReason::Expired
        }
    }

    /// Resolves when the hold is lost, at the latest when its validity deadline passes.
    pub(crate) async fn lost(&self) -> LostReason {
        let mut changes = self.lost.subscribe();
        loop {
            if let Some(reason) = self.lost_reason() {
                return reason;
            }
            if self.retired.load(Ordering::Acquire) {
                // Released cleanly: nothing more can be lost.
                std::future::pending::<()>().await;
            }
            tokio::select! {
                // The sender lives in `self`, so `changed` cannot fail while we borrow it.
                _ = changes.changed() => {}
                _ = tokio::time::sleep_until(self.valid_until()) => {}
            }
        }
    }

    fn add_guard(&self, lease: Lease, started: Instant) {
        self.guards.fetch_add(1, Ordering::AcqRel);
        if let Lease::Watchdog(ms) = lease {
            self.lease_ms.store(ms, Ordering::Relaxed);
            self.watchdog.store(true, Ordering::Relaxed);
        } else if !self.is_watchdog() {
            self.lease_ms.store(lease.millis(), Ordering::Relaxed);
        }
        // Stored, not maxed: the script just set the key's expiry to this lease, which may be
        // shorter than what an earlier fixed lease promised.
        self.reset_validity(started, self.lease_ms());
    }

    /// Local validity after an acquire or a reentrant unlock, sent at `started`, applied this
    /// hold's lease.
    pub(crate) fn lease_applied(&self, started: Instant) {
        if self.is_watchdog() {
            self.renewed(started);
        } else {
            self.reset_validity(started, self.lease_ms());
        }
    }
}

type HoldKey = (Arc<str>, Arc<str>);

/// Every hold of one client, by (lock key, owner).
#[derive(Debug, Default)]
pub(crate) struct Holds {
    map: DashMap<HoldKey, Arc<Hold>>,
}

impl Holds {
    /// The lease a new acquire by `owner` should apply: the live hold's watchdog lease when
    /// the call re-enters a watchdog hold (see [`Hold::lease_ms`]), else `requested`.
    pub(crate) fn lease_for(&self, key: &Arc<str>, owner: &Arc<str>, requested: Lease) -> Lease {
        match self.map.get(&(key.clone(), owner.clone())) {
            Some(hold) if hold.is_watchdog() && hold.lost_reason().is_none() => {
                Lease::Watchdog(hold.lease_ms())
            }
            _ => requested,
        }
    }

    /// `owner`'s live (not lost, not released) hold on `key`.
    pub(crate) fn live(&self, key: &Arc<str>, owner: &Arc<str>) -> Option<Arc<Hold>> {
        self.map
            .get(&(key.clone(), owner.clone()))
            .filter(|hold| hold.lost_reason().is_none() && !hold.is_released())
            .map(|hold| hold.clone())
    }

    /// Whether `owner` has a live (not lost) hold on `key`.
    pub(crate) fn is_held(&self, key: &Arc<str>, owner: &Arc<str>) -> bool {
        self.map
            .get(&(key.clone(), owner.clone()))
            .is_some_and(|hold| hold.lost_reason().is_none())
    }

    /// Records one more guard after a successful acquire sent at `started`: joins the
    /// owner's live hold (re-entry), or starts a new one in place of a lost one.
    pub(crate) fn add(
        &self,
        key: &Arc<str>,
        owner: &Arc<str>,
        lease: Lease,
        started: Instant,
    ) -> Arc<Hold> {
        match self.map.entry((key.clone(), owner.clone())) {
            Entry::Occupied(mut entry) => {
                let hold = entry.get();
                if hold.lost_reason().is_none() && !hold.is_released() {
                    hold.add_guard(lease, started);
                    hold.clone()
                } else {
                    let fresh = Arc::new(Hold::new(key.clone(), owner.clone(), lease, started));
                    entry.insert(fresh.clone());
                    fresh
                }
            }
            Entry::Vacant(entry) => {
                let fresh = Arc::new(Hold::new(key.clone(), owner.clone(), lease, started));
                entry.insert(fresh.clone());
                fresh
            }
        }
    }

    /// Drops one guard of `hold`; at the last one the hold leaves the registry, which stops
    /// its renewal, and retires. Returns whether that was the last guard.
    ///
    /// The count and the removal change under the registry entry's lock, so that a re-entry
    /// racing with the last release either joins the hold before it goes or starts a new one.
    pub(crate) fn release(&self, hold: &Arc<Hold>) -> bool {
        let mut last = None;
        self.map
            .remove_if(&(hold.key.clone(), hold.owner.clone()), |_, current| {
                if !Arc::ptr_eq(current, hold) {
                    return false;
                }
                let was_last = hold.guards.fetch_sub(1, Ordering::AcqRel) == 1;
                last = Some(was_last);
                was_last
            });
        // Not registered (any more): it was lost and dropped from the registry.
        let last = last.unwrap_or_else(|| hold.guards.fetch_sub(1, Ordering::AcqRel) == 1);
        if last {
            hold.retired.store(true, Ordering::Release);
        }
        last
    }

    /// This client's live holds on `key`, taken before deleting the lock so that only holds
    /// the delete can have hit are told.
    pub(crate) fn holds_of(&self, key: &str) -> Vec<Arc<Hold>> {
        self.map
            .iter()
            .filter(|hold| &*hold.key == key)
            .map(|hold| hold.clone())
            .collect()
    }

    /// The holds the watchdog should renew now, dropping lost ones from the registry so
    /// that nothing keeps renewing a lock its owner was told it lost.
    pub(crate) fn to_renew(&self) -> Vec<Arc<Hold>> {
        self.map.retain(|_, hold| hold.lost_reason().is_none());
        self.map
            .iter()
            .filter(|hold| hold.is_watchdog())
            .map(|hold| hold.clone())
            .collect()
    }

    pub(crate) fn has_watchdog_holds(&self) -> bool {
        self.map.iter().any(|hold| hold.is_watchdog())
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}
