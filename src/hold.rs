//! What this client holds: one [`Hold`] per (lock key, owner), shared by that owner's
//! reentrant guards, and the registry the watchdog renews from.
//!
//! A hold keeps a local validity deadline on the monotonic clock: the start of the last
//! confirmed acquire or renewal, plus the lease, minus a clock-drift allowance. Past it
//! the lock may already have expired in Redis, so the guard must assume it lost.

use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::LostReason;
use crate::watch_list::{WatchList, NOT_LISTED};

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

/// The lease one request applies to a hold's key: the hold's own, shortened where the
/// hold's maximum hold time ends sooner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Applied {
    pub(crate) ms: u64,
    /// The maximum hold time shortened it: once this lease runs out, the hold ends for good.
    pub(crate) capped: bool,
}

impl Applied {
    /// `lease_ms`, cut short so that, applied at `at`, it ends by `cap` at the latest.
    pub(crate) fn within(lease_ms: u64, cap: Option<Instant>, at: Instant) -> Applied {
        let Some(cap) = cap else {
            return Applied {
                ms: lease_ms,
                capped: false,
            };
        };
        let left = u64::try_from(cap.saturating_duration_since(at).as_millis()).unwrap_or(u64::MAX);
        if left < lease_ms {
            // At least 1 ms: PEXPIRE 0 would delete the key, which is the unlock's job.
            Applied {
                ms: left.max(1),
                capped: true,
            }
        } else {
            Applied {
                ms: lease_ms,
                capped: false,
            }
        }
    }

    /// Whether a renewal with this lease would end before the drift allowance: nothing is
    /// left to renew.
    pub(crate) fn is_spent(self) -> bool {
        Duration::from_millis(self.ms) <= drift(self.ms)
    }

    /// The local validity deadline of this lease applied by a request sent at `started`.
    fn deadline(self, started: Instant) -> Instant {
        started + Duration::from_millis(self.ms).saturating_sub(drift(self.ms))
    }
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
    /// The [`HoldId`] hash of `key` and `owner`.
    hash: u64,
    /// Live guards; the hold leaves the registry when this reaches zero.
    guards: AtomicU32,
    lease_ms: AtomicU64,
    watchdog: AtomicBool,
    valid_until: AtomicU64,
    /// The end of the maximum hold time (nanoseconds since [`EPOCH`]; `u64::MAX`: none):
    /// no lease applied to the key reaches past it.
    max_until: AtomicU64,
    /// The last lease applied was cut short by the maximum hold time, so the validity
    /// deadline is the end of the hold, not a renewal that failed to come.
    capped: AtomicBool,
    /// Set while a renewal was sent and not confirmed, to name the reason if the deadline
    /// passes meanwhile: Redis did not answer in time, rather than nobody asked it (a
    /// paused process).
    renewal_unconfirmed: AtomicBool,
    /// Why the hold was lost ([`LostCode`]), set once. Atomics and a `Notify` rather than
    /// a watch channel: every acquire makes a hold, and a channel is an allocation, a lock
    /// per read and eight notifiers to wake when dropped.
    lost: AtomicU8,
    /// Told when `lost` is set.
    lost_set: Notify,
    /// Set when the last guard was released: the deadline no longer means anything, and
    /// `lost()` stays pending.
    retired: AtomicBool,
    /// Its slot in the watchdog's [`WatchList`], or [`NOT_LISTED`].
    watch_slot: AtomicUsize,
}

impl Hold {
    fn new(id: &HoldId, terms: Terms, started: Instant, applied: Applied) -> Self {
        let hold = Hold {
            key: id.key.clone(),
            owner: id.owner.clone(),
            hash: id.hash,
            guards: AtomicU32::new(1),
            lease_ms: AtomicU64::new(terms.lease.millis()),
            watchdog: AtomicBool::new(matches!(terms.lease, Lease::Watchdog(_))),
            valid_until: AtomicU64::new(0),
            max_until: AtomicU64::new(terms.max_until.map_or(u64::MAX, to_nanos)),
            capped: AtomicBool::new(false),
            renewal_unconfirmed: AtomicBool::new(false),
            lost: AtomicU8::new(LostCode::NOT_LOST),
            lost_set: Notify::new(),
            retired: AtomicBool::new(false),
            watch_slot: AtomicUsize::new(NOT_LISTED),
        };
        hold.reset_validity(started, applied);
        hold
    }

    /// The registry entry of this hold.
    fn id(&self) -> HoldId {
        HoldId {
            key: self.key.clone(),
            owner: self.owner.clone(),
            hash: self.hash,
        }
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

    /// Its slot in the watchdog's list; only [`WatchList`] reads or sets it.
    pub(crate) fn watch_slot(&self) -> &AtomicUsize {
        &self.watch_slot
    }

    /// The end of the maximum hold time, if one was set.
    fn max_until(&self) -> Option<Instant> {
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
        if self.retired.load(Ordering::Acquire) {
            return false;
        }
        self.set_lost(reason)
    }

    /// Marks the hold lost when its own release found the lock gone: the hold is retired
    /// by then, but the loss happened before, and a `lost()` future taken earlier must
    /// resolve rather than wait forever.
    pub(crate) fn release_found_lost(&self, reason: LostReason) -> bool {
        self.set_lost(reason)
    }

    fn set_lost(&self, reason: LostReason) -> bool {
        let marked = self
            .lost
            .compare_exchange(
                LostCode::NOT_LOST,
                LostCode::of(reason),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok();
        if marked {
            self.valid_until
                .fetch_min(to_nanos(Instant::now()), Ordering::AcqRel);
            self.lost_set.notify_waiters();
            tracing::warn!(lock = %self.key, owner = %self.owner, %reason, "lock lost");
        }
        marked
    }

    /// Redis answered that the owner's field is gone: the hold is lost, as
    /// [`LostReason::Expired`] if its lease had run out locally too, otherwise as
    /// [`LostReason::Released`] (someone removed it, or Redis forgot it). Nothing to report
    /// for a hold already released.
    pub(crate) fn found_gone(&self) {
        if self.is_released() {
            return;
        }
        let reason = if Instant::now() >= self.valid_until() {
            LostReason::Expired
        } else {
            LostReason::Released
        };
        self.mark_lost(reason);
    }

    /// Why the hold was marked lost, if it was (the deadline unchecked).
    fn lost_mark(&self) -> Option<LostReason> {
        LostCode::reason(self.lost.load(Ordering::Acquire))
    }

    /// Why the hold is lost, checking the validity deadline first.
    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        self.lost_reason_at(Instant::now())
    }

    /// [`lost_reason`](Hold::lost_reason) with the clock read once by the caller: the
    /// watchdog checks a whole batch at one instant.
    fn lost_reason_at(&self, now: Instant) -> Option<LostReason> {
        if let Some(reason) = self.lost_mark() {
            return Some(reason);
        }
        if !self.retired.load(Ordering::Acquire) && now >= self.valid_until() {
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

    fn add_guard(&self, terms: Terms, started: Instant, applied: Applied) {
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
    /// `applied` (from [`lease_at`](Hold::lease_at)).
    pub(crate) fn lease_applied(&self, started: Instant, applied: Applied) {
        if self.is_watchdog() {
            self.renewed(started, applied);
        } else {
            self.reset_validity(started, applied);
        }
    }
}

/// [`LostReason`] as stored in [`Hold::lost`].
struct LostCode;

impl LostCode {
    const NOT_LOST: u8 = 0;

    fn of(reason: LostReason) -> u8 {
        match reason {
            LostReason::Expired => 1,
            LostReason::Released => 2,
            LostReason::ConnectionLost => 3,
            LostReason::QuorumLost => 4,
            LostReason::MaxHoldReached => 5,
        }
    }

    fn reason(code: u8) -> Option<LostReason> {
        match code {
            1 => Some(LostReason::Expired),
            2 => Some(LostReason::Released),
            3 => Some(LostReason::ConnectionLost),
            4 => Some(LostReason::QuorumLost),
            5 => Some(LostReason::MaxHoldReached),
            _ => None,
        }
    }
}

/// What an acquire asks of the hold it joins or starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Terms {
    pub(crate) lease: Lease,
    /// When the hold must end, whatever the watchdog: acquire start + the maximum hold time.
    pub(crate) max_until: Option<Instant>,
}

/// A (lock key, owner) pair, the key of [`Holds`], with its hash reckoned once: an acquire
/// and its release look it up five times, and hashing the two strings each time cost
/// more than the rest of those lookups. Made by [`Holds::id`].
#[derive(Debug, Clone)]
pub(crate) struct HoldId {
    key: Arc<str>,
    owner: Arc<str>,
    /// Of `key` and `owner`, under the registry's random keys (see [`Holds::id`]).
    hash: u64,
}

impl PartialEq for HoldId {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.key == other.key && self.owner == other.owner
    }
}

impl Eq for HoldId {}

impl Hash for HoldId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// Hands a [`HoldId`]'s own hash to the maps keyed by it: it was made with random keys
/// already, so hashing it again would add nothing.
#[derive(Default)]
struct CarriedHash(u64);

impl Hasher for CarriedHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is ever called; fold anything else in all the same.
        for byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}

type ById<V> = DashMap<HoldId, V, BuildHasherDefault<CarriedHash>>;

/// Every hold of one client, by (lock key, owner).
#[derive(Debug, Default)]
pub(crate) struct Holds {
    /// The keys of every [`HoldId`] hash, random per registry as a `HashMap`'s are, so that
    /// nobody who picks lock names can pick colliding ones.
    ids: RandomState,
    map: ById<Arc<Hold>>,
    /// The watchdog holds among them, in the order the watchdog walks them.
    watch: WatchList,
    /// Acquires of each (lock key, owner) sent and not yet settled: their counts may be in
    /// Redis before their holds are here.
    in_flight: ById<usize>,
}

/// One acquire on its way: counted in [`Holds::is_busy`] until dropped.
#[derive(Debug)]
pub(crate) struct InFlight {
    holds: Arc<Holds>,
    key: HoldId,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.holds.in_flight.remove_if_mut(&self.key, |_, count| {
            *count -= 1;
            *count == 0
        });
    }
}

impl Holds {
    /// The registry key of `owner`'s hold on `key`.
    pub(crate) fn id(&self, key: &Arc<str>, owner: &Arc<str>) -> HoldId {
        HoldId {
            key: key.clone(),
            owner: owner.clone(),
            hash: self.ids.hash_one((&**key, &**owner)),
        }
    }

    /// What a new acquire by `owner` asks for: the live hold's watchdog lease when the call
    /// re-enters a watchdog hold (see [`Hold::lease_ms`]), else `requested`; and the
    /// earlier of the live hold's end of maximum hold time and the requested one.
    pub(crate) fn terms_for(&self, id: &HoldId, requested: Terms) -> Terms {
        let Some(hold) = self.map.get(id) else {
            return requested;
        };
        if hold.lost_reason().is_some() {
            return requested;
        }
        let lease = if hold.is_watchdog() {
            Lease::Watchdog(hold.lease_ms())
        } else {
            requested.lease
        };
        let max_until = match (hold.max_until(), requested.max_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Terms { lease, max_until }
    }

    /// The live (not lost, not released) hold of `id`.
    pub(crate) fn live(&self, id: &HoldId) -> Option<Arc<Hold>> {
        self.map
            .get(id)
            .filter(|hold| hold.lost_reason().is_none() && !hold.is_released())
            .map(|hold| hold.clone())
    }

    /// Whether the owner of `id` has a live (not lost) hold on its key.
    pub(crate) fn is_held(&self, id: &HoldId) -> bool {
        self.map
            .get(id)
            .is_some_and(|hold| hold.lost_reason().is_none())
    }

    /// Records one more guard after a successful acquire sent at `started`: joins the
    /// owner's live hold (re-entry), or starts a new one in place of a lost one.
    pub(crate) fn add(
        &self,
        id: &HoldId,
        terms: Terms,
        started: Instant,
        applied: Applied,
    ) -> Arc<Hold> {
        let fresh = || Arc::new(Hold::new(id, terms, started, applied));
        // Listed under the entry's lock: a re-entry that makes a fixed-lease hold a watchdog
        // one lists it before any release of its guard can delist it.
        let listed = |hold: Arc<Hold>| {
            if hold.is_watchdog() {
                self.watch.enlist(&hold);
            }
            hold
        };
        match self.map.entry(id.clone()) {
            Entry::Occupied(mut entry) => {
                let hold = entry.get();
                if hold.lost_reason().is_none() && !hold.is_released() {
                    hold.add_guard(terms, started, applied);
                    listed(hold.clone())
                } else {
                    let hold = listed(fresh());
                    entry.insert(hold.clone());
                    hold
                }
            }
            Entry::Vacant(entry) => listed(entry.insert(fresh()).clone()),
        }
    }

    /// Drops one guard of `hold`; at the last one the hold leaves the registry, which stops
    /// its renewal, and retires. Returns whether that was the last guard.
    ///
    /// The count and the removal change under the registry entry's lock, so that a re-entry
    /// racing with the last release either joins the hold before it goes or starts a new one.
    pub(crate) fn release(&self, hold: &Arc<Hold>) -> bool {
        let mut last = None;
        self.map.remove_if(&hold.id(), |_, current| {
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
            self.watch.delist(hold);
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

    /// Where the watchdog's walk over its slots ends this round.
    pub(crate) fn watch_slots(&self) -> usize {
        self.watch.slot_count()
    }

    /// Up to `count` watchdog holds still live at `now`, from the slots `from..end`, and
    /// the slot to go on from. Holds found lost leave the watchdog's list and the
    /// registry, so that nothing keeps renewing a lock its owner was told it lost.
    pub(crate) fn due(
        &self,
        from: usize,
        end: usize,
        count: usize,
        now: Instant,
    ) -> (Vec<Arc<Hold>>, usize) {
        let gathered = self.watch.batch(from, end, count, |hold| {
            hold.is_released() || hold.lost_reason_at(now).is_some()
        });
        for hold in gathered.dropped {
            self.map
                .remove_if(&hold.id(), |_, current| Arc::ptr_eq(current, &hold));
        }
        (gathered.kept, gathered.next)
    }

    pub(crate) fn has_watchdog_holds(&self) -> bool {
        !self.watch.is_empty()
    }

    /// The live holds the watchdog does not renew: those of fixed leases.
    pub(crate) fn fixed_lease_holds(&self) -> Vec<Arc<Hold>> {
        self.map
            .iter()
            .filter(|hold| !hold.is_watchdog() && !hold.is_released())
            .filter(|hold| hold.lost_reason().is_none())
            .map(|hold| hold.clone())
            .collect()
    }

    /// Whether any hold has a fixed lease.
    pub(crate) fn has_fixed_lease_holds(&self) -> bool {
        self.map.iter().any(|hold| !hold.is_watchdog())
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Counts an acquire of `id` as on its way until the returned guard drops: from before
    /// it is sent until its hold, if any, is registered.
    pub(crate) fn attempt_started(self: &Arc<Self>, id: &HoldId) -> InFlight {
        let key = id.clone();
        *self.in_flight.entry(key.clone()).or_insert(0) += 1;
        InFlight {
            holds: self.clone(),
            key,
        }
    }

    /// Whether the owner of `id` has a live hold on its key, or an acquire on its way that
    /// may have added a count in Redis already.
    pub(crate) fn is_busy(&self, id: &HoldId) -> bool {
        self.is_held(id) || self.in_flight.contains_key(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watchdog_hold(lease_ms: u64) -> Hold {
        let terms = Terms {
            lease: Lease::Watchdog(lease_ms),
            max_until: None,
        };
        let now = Instant::now();
        let id = Holds::default().id(&"k".into(), &"o".into());
        Hold::new(&id, terms, now, Applied::within(lease_ms, None, now))
    }

    #[tokio::test]
    async fn lost_resolves_when_marked_and_keeps_the_first_reason() {
        let hold = Arc::new(watchdog_hold(30_000));
        let waiting = tokio::spawn({
            let hold = hold.clone();
            async move { hold.lost().await }
        });
        tokio::task::yield_now().await;
        assert_eq!(hold.lost_reason(), None);
        assert!(hold.mark_lost(LostReason::Released));
        assert!(!hold.mark_lost(LostReason::Expired));
        assert_eq!(waiting.await.unwrap(), LostReason::Released);
        assert_eq!(hold.lost_reason(), Some(LostReason::Released));
        assert!(hold.valid_until() <= Instant::now());
    }

    #[tokio::test]
    async fn lost_resolves_when_the_deadline_passes() {
        let hold = watchdog_hold(10);
        hold.renewal_sent();
        assert_eq!(hold.lost().await, LostReason::ConnectionLost);
    }

    fn add(holds: &Holds, key: &str, lease: Lease) -> Arc<Hold> {
        let terms = Terms {
            lease,
            max_until: None,
        };
        let now = Instant::now();
        let id = holds.id(&key.into(), &"o".into());
        holds.add(&id, terms, now, Applied::within(lease.millis(), None, now))
    }

    fn due_keys(holds: &Holds) -> Vec<String> {
        let (due, _) = holds.due(0, usize::MAX, usize::MAX, Instant::now());
        due.iter().map(|hold| hold.key.to_string()).collect()
    }

    #[tokio::test]
    async fn the_watchdog_list_reuses_freed_places_and_empties() {
        let holds = Holds::default();
        let a = add(&holds, "a", Lease::Watchdog(30_000));
        let b = add(&holds, "b", Lease::Watchdog(30_000));
        let _fixed = add(&holds, "fixed", Lease::Fixed(30_000));
        let c = add(&holds, "c", Lease::Watchdog(30_000));
        assert_eq!(due_keys(&holds), ["a", "b", "c"]);
        assert!(holds.release(&b));
        assert_eq!(due_keys(&holds), ["a", "c"]);
        let d = add(&holds, "d", Lease::Watchdog(30_000));
        assert_eq!(holds.watch_slots(), 3, "d takes b's place");
        assert_eq!(due_keys(&holds), ["a", "d", "c"]);
        // A re-entry with the watchdog lists a fixed-lease hold.
        let fixed = add(&holds, "fixed", Lease::Watchdog(30_000));
        assert_eq!(due_keys(&holds), ["a", "d", "c", "fixed"]);
        for hold in [&a, &c, &d, &fixed] {
            holds.release(hold);
        }
        assert!(
            holds.has_watchdog_holds(),
            "the first guard on 'fixed' is live"
        );
        assert!(holds.release(&fixed));
        assert!(!holds.has_watchdog_holds());
        assert_eq!(
            holds.watch_slots(),
            0,
            "the memory of the list is given back"
        );
    }

    #[tokio::test]
    async fn a_hold_found_lost_leaves_the_list_and_the_registry() {
        let holds = Holds::default();
        let kept = add(&holds, "kept", Lease::Watchdog(30_000));
        let lost = add(&holds, "lost", Lease::Watchdog(30_000));
        lost.mark_lost(LostReason::Released);
        assert_eq!(due_keys(&holds), ["kept"]);
        assert_eq!(holds.len(), 1);
        assert!(!holds.is_held(&holds.id(&lost.key, &lost.owner)));
        assert!(holds.is_held(&holds.id(&kept.key, &kept.owner)));
    }

    #[test]
    fn every_reason_survives_its_code() {
        for reason in [
            LostReason::Expired,
            LostReason::Released,
            LostReason::ConnectionLost,
            LostReason::QuorumLost,
            LostReason::MaxHoldReached,
        ] {
            assert_eq!(LostCode::reason(LostCode::of(reason)), Some(reason));
        }
        assert_eq!(LostCode::reason(LostCode::NOT_LOST), None);
    }
}
