//! [`Holds`]: every hold of one client, by (lock key, owner), and the acquires on their
//! way; the registry the watchdog renews from and the lease check reads.

use crate::util::lock_metrics::LockMetrics;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use tokio::time::Instant;

use super::hold::{Hold, Renewal};
use super::lease::{Applied, Lease, Terms};
use super::watch_list::WatchList;
use crate::error::LostReason;

/// A (lock key, owner) pair, the key of [`Holds`], with its hash reckoned once: an acquire
/// and its release look it up five times, and hashing the two strings each time cost
/// more than the rest of those lookups. Made by [`Holds::id`].
///
/// Equal when all three are, the hash compared first (the derived order of the fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HoldId {
    /// Of `key` and `owner`, under the registry's random keys (see [`Holds::id`]).
    pub(super) hash: u64,
    /// The lock's key.
    pub(crate) key: Arc<str>,
    /// The owner field whose hold this is.
    pub(crate) owner: Arc<str>,
}

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
        self.0 = (bytes.iter()).fold(self.0, |hash, b| hash.rotate_left(8) ^ u64::from(*b));
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}

type ById<V> = DashMap<HoldId, V, BuildHasherDefault<CarriedHash>>;

/// The indices of acquires and of releases in [`Holds`]' counts of those on their way.
const ACQUIRES: usize = 0;
const RELEASES: usize = 1;

/// Every hold of one client, by (lock key, owner).
#[derive(Debug, Default)]
pub(crate) struct Holds {
    /// The keys of every [`HoldId`] hash, random per registry as a `HashMap`'s are, so that
    /// nobody who picks lock names can pick colliding ones.
    ids: RandomState,
    map: ById<Arc<Hold>>,
    /// The watchdog holds among them, in the order the watchdog walks them.
    pub(crate) watch: WatchList,
    /// The acquires (`[0]`) and releases (`[1]`) of each (lock key, owner) on their way,
    /// while any is. An acquire sent and not yet settled may have its count in Redis before
    /// its hold is here; an acquire of the same owner waits for the releases (see
    /// [`Holds::attempt_started`]).
    on_their_way: ById<[usize; 2]>,
    /// Told when a release ends while an acquire waits for one.
    release_ended: tokio::sync::Notify,
    /// Acquires waiting in [`Holds::attempt_started`]: a release told nobody skips the
    /// notify (a lock per release otherwise).
    release_waiters: AtomicUsize,
}

/// One acquire or release on its way, counted until dropped: an acquire in
/// [`Holds::is_busy`], a release in [`Holds::attempt_started`].
#[derive(Debug)]
pub(crate) struct OnItsWay {
    holds: Arc<Holds>,
    key: HoldId,
    /// Its index in `on_their_way`: 1 for a release, 0 for an acquire.
    index: usize,
}

impl Drop for OnItsWay {
    fn drop(&mut self) {
        let counts = &self.holds.on_their_way;
        counts.remove_if_mut(&self.key, |_, counts| {
            counts[self.index] -= 1;
            *counts == [0, 0]
        });
        // SeqCst, paired with the waiter's: either it sees the count gone, or this sees it.
        if self.index == RELEASES && self.holds.release_waiters.load(Ordering::SeqCst) > 0 {
            self.holds.release_ended.notify_waiters();
        }
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
        let Some(hold) = self.map.get(id).filter(|hold| hold.lost_reason().is_none()) else {
            return requested;
        };
        let lease = if hold.is_watchdog() {
            Lease::Watchdog(hold.lease_ms())
        } else {
            requested.lease
        };
        // The earlier of the two ends, if either is set.
        let ends = [hold.max_until(), requested.max_until];
        let max_until = ends.into_iter().flatten().min();
        Terms { lease, max_until }
    }

    /// The live (not lost, not released) hold of `id`.
    pub(crate) fn live(&self, id: &HoldId) -> Option<Arc<Hold>> {
        self.unreleased(id, Hold::lost_reason)
    }

    /// The hold of `id` not known lost nor released: a live one, or a permit past its
    /// deadline that Redis may still have (see [`Hold::assumed_expired`]).
    pub(crate) fn not_known_lost(&self, id: &HoldId) -> Option<Arc<Hold>> {
        self.unreleased(id, Hold::known_lost)
    }

    /// The hold of `id`, unless released or `lost` says why it was lost.
    fn unreleased(&self, id: &HoldId, lost: fn(&Hold) -> Option<LostReason>) -> Option<Arc<Hold>> {
        let hold = self.map.get(id)?;
        (lost(&hold).is_none() && !hold.is_released()).then(|| hold.clone())
    }

    /// Whether the owner of `id` has a live (not lost) hold on its key.
    pub(crate) fn is_held(&self, id: &HoldId) -> bool {
        (self.map.get(id)).is_some_and(|hold| hold.lost_reason().is_none())
    }

    /// Records one more guard after a successful acquire sent at `started`: joins the
    /// owner's live hold (re-entry), or starts a new one in place of a lost one, renewed
    /// as `renewal` says.
    ///
    /// `replaces` is the hold this owner had when the acquire was sent, if Redis answered
    /// that it made the owner's field anew: that hold's count had left Redis before the
    /// acquire ran (a force unlock, a restart without persistence, an eviction), so it is
    /// lost, told at once, and the acquire starts a hold of its own. Joining it instead would
    /// let a release of the new guard free the lock under the old one's still-valid guard.
    /// Only a hold already registered when the acquire was sent can be proven lost this
    /// way: one registered meanwhile may be a concurrent acquire of the same owner that Redis
    /// ran after this one.
    // Each argument is one fact of the acquire that ran; the two callers have them apart.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add(
        &self,
        id: &HoldId,
        renewal: Renewal,
        terms: Terms,
        started: Instant,
        applied: Applied,
        replaces: Option<&Arc<Hold>>,
        metrics: &LockMetrics,
    ) -> Arc<Hold> {
        // Joins the registered hold if it is live, once a hold this acquire proved lost is
        // marked so.
        let joins = |hold: &Arc<Hold>| {
            if replaces.is_some_and(|lost| Arc::ptr_eq(lost, hold)) {
                hold.mark_lost(LostReason::Released);
            }
            hold.lost_reason().is_none() && !hold.is_released()
        };
        let hold = match self.map.entry(id.clone()) {
            Entry::Occupied(entry) if joins(entry.get()) => {
                entry.get().add_guard(terms, started, applied);
                entry.into_ref()
            }
            entry => {
                let fresh = Hold::new(id.clone(), renewal, terms, started, applied, metrics);
                entry.insert(Arc::new(fresh))
            }
        };
        // Listed under the entry's lock: a re-entry that makes a fixed-lease hold a watchdog
        // one lists it before any release of its guard can delist it.
        if hold.is_watchdog() {
            self.watch.enlist(&hold);
        }
        Arc::clone(&hold)
    }

    /// Marks `hold` lost as [`Hold::mark_lost`] does, under its registry entry's lock (so
    /// that no re-entry joins it meanwhile), if it is still the owner's registered hold.
    /// For an acquire that proved it lost (see [`add`](Holds::add)) and was then undone.
    pub(crate) fn replaced(&self, hold: &Arc<Hold>) {
        if let Some(current) = self.map.get(&hold.id) {
            if Arc::ptr_eq(&current, hold) {
                current.mark_lost(LostReason::Released);
            }
        }
    }

    /// Drops one guard of `hold`; at the last one the hold leaves the registry, which stops
    /// its renewal, and retires. Returns whether that was the last guard.
    ///
    /// The count and the removal change under the registry entry's lock, so that a re-entry
    /// racing with the last release either joins the hold before it goes or starts a new one.
    pub(crate) fn release(&self, hold: &Arc<Hold>) -> bool {
        let one_guard_less = || hold.guards.fetch_sub(1, Ordering::AcqRel) == 1;
        let mut registered = false;
        let removed = self.map.remove_if(&hold.id, |_, current| {
            registered = Arc::ptr_eq(current, hold);
            registered && one_guard_less()
        });
        // Not registered (any more): it was lost and dropped from the registry.
        let last = removed.is_some() || (!registered && one_guard_less());
        if last {
            hold.retired.store(true, Ordering::Release);
            hold.uncount();
            self.watch.delist(hold);
        }
        last
    }

    /// This client's live holds on `key`, taken before deleting the lock so that only holds
    /// the delete can have hit are told.
    pub(crate) fn holds_of(&self, key: &str) -> Vec<Arc<Hold>> {
        self.map
            .iter()
            .filter(|hold| &*hold.id.key == key)
            .map(|hold| hold.clone())
            .collect()
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
                .remove_if(&hold.id, |_, current| Arc::ptr_eq(current, &hold));
        }
        (gathered.kept, gathered.next)
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

    /// How many holds the registry has, lost ones not yet dropped included.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Counts a release of `id` as on its way until the returned guard drops: from the
    /// moment its guard lets go (before anything is sent) until its answer is in.
    pub(crate) fn release_started(self: &Arc<Self>, id: &HoldId) -> OnItsWay {
        self.count_on_its_way(id, RELEASES)
    }

    fn count_on_its_way(self: &Arc<Self>, id: &HoldId, index: usize) -> OnItsWay {
        self.on_their_way.entry(id.clone()).or_default()[index] += 1;
        OnItsWay {
            holds: self.clone(),
            key: id.clone(),
            index,
        }
    }

    /// How many acquires (`index` 0) or releases (1) of `id` are on their way.
    fn on_their_way(&self, id: &HoldId, index: usize) -> usize {
        self.on_their_way.get(id).map_or(0, |counts| counts[index])
    }

    /// How many releases of `id` are on their way (see [`Holds::release_started`]).
    pub(crate) fn releases_on_their_way(&self, id: &HoldId) -> usize {
        self.on_their_way(id, RELEASES)
    }

    /// Waits until no release of `id` is on its way, then counts an acquire of `id` as on
    /// its way until the returned guard drops (until its hold, if any, is registered).
    ///
    /// An acquire sends only once the owner's releases are answered: the same owner's
    /// release and acquire go out through separate batches and may reach Redis in either
    /// order, and a release that ran after the acquire would take the acquire's count
    /// (freeing the lock under the new guard, if the released hold had already left Redis).
    /// Releases are bounded by the client's retries, so this wait is too.
    ///
    /// The check and the count are one step, under the entry's lock: a release counted
    /// before it is waited for, and one counted after it sees the acquire (see
    /// `release_leftovers` in `locks::guard`, which then takes no leftover count back). An
    /// acquire still waiting is not counted, so that one dropped while it waits does not
    /// keep the leftovers of the release it waited for.
    pub(crate) async fn attempt_started(self: &Arc<Self>, id: &HoldId) -> OnItsWay {
        let counted = || {
            let mut counts = self.on_their_way.entry(id.clone()).or_default();
            (counts[RELEASES] == 0).then(|| {
                counts[ACQUIRES] += 1;
                OnItsWay {
                    holds: self.clone(),
                    key: id.clone(),
                    index: ACQUIRES,
                }
            })
        };
        // The common case, on every acquire: no release to wait for.
        if let Some(counted) = counted() {
            return counted;
        }
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            // Also when the acquire is dropped while it waits.
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.release_waiters.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.release_waiters);
        loop {
            let ended = self.release_ended.notified();
            tokio::pin!(ended);
            // Registered before the check: a release ending in between is heard.
            ended.as_mut().enable();
            if let Some(counted) = counted() {
                return counted;
            }
            ended.await;
        }
    }

    /// Whether the owner of `id` has a live hold on its key, or an acquire on its way that
    /// may have added a count in Redis already.
    pub(crate) fn is_busy(&self, id: &HoldId) -> bool {
        self.is_held(id) || self.on_their_way(id, ACQUIRES) > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WATCHDOG: Lease = Lease::Watchdog(30_000);
    const FIXED: Lease = Lease::Fixed(30_000);

    #[tokio::test]
    async fn lost_resolves_when_marked_and_keeps_the_first_reason() {
        let hold = add(&Holds::default(), "k", WATCHDOG);
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
        let hold = add(&Holds::default(), "k", Lease::Watchdog(10));
        hold.renewal_sent();
        assert_eq!(hold.lost().await, LostReason::ConnectionLost);
    }

    fn add(holds: &Holds, key: &str, lease: Lease) -> Arc<Hold> {
        let (now, id) = (Instant::now(), holds.id(&key.into(), &"o".into()));
        let (applied, metrics) = (
            Applied::within(lease.millis(), None, now),
            Default::default(),
        );
        let terms = Terms {
            lease,
            max_until: None,
        };
        holds.add(&id, Renewal::Key, terms, now, applied, None, &metrics)
    }

    fn due_keys(holds: &Holds) -> Vec<String> {
        let (due, _) = holds.due(0, usize::MAX, usize::MAX, Instant::now());
        due.iter().map(|hold| hold.id.key.to_string()).collect()
    }

    #[tokio::test]
    async fn the_watchdog_list_reuses_freed_places_and_empties() {
        let holds = Holds::default();
        let a = add(&holds, "a", WATCHDOG);
        let b = add(&holds, "b", WATCHDOG);
        let _fixed = add(&holds, "fixed", FIXED);
        let c = add(&holds, "c", WATCHDOG);
        assert_eq!(due_keys(&holds), ["a", "b", "c"]);
        assert!(holds.release(&b));
        assert_eq!(due_keys(&holds), ["a", "c"]);
        let d = add(&holds, "d", WATCHDOG);
        assert_eq!(holds.watch.slot_count(), 3, "d takes b's place");
        assert_eq!(due_keys(&holds), ["a", "d", "c"]);
        // A re-entry with the watchdog lists a fixed-lease hold.
        let fixed = add(&holds, "fixed", WATCHDOG);
        assert_eq!(due_keys(&holds), ["a", "d", "c", "fixed"]);
        for hold in [&a, &c, &d, &fixed] {
            holds.release(hold);
        }
        assert!(holds.watch.len() > 0, "the first guard on 'fixed' is live");
        assert!(holds.release(&fixed));
        assert!(holds.watch.len() == 0);
        let slots = holds.watch.slot_count();
        assert_eq!(slots, 0, "the memory of the list is given back");
    }

    #[tokio::test]
    async fn a_hold_found_lost_leaves_the_list_and_the_registry() {
        let holds = Holds::default();
        let [kept, lost] = ["kept", "lost"].map(|key| add(&holds, key, WATCHDOG));
        lost.mark_lost(LostReason::Released);
        assert_eq!(due_keys(&holds), ["kept"]);
        assert_eq!(holds.len(), 1);
        assert!(!holds.is_held(&holds.id(&lost.id.key, &lost.id.owner)));
        assert!(holds.is_held(&holds.id(&kept.id.key, &kept.id.owner)));
    }

    #[test]
    fn every_reason_survives_being_stored() {
        for reason in [
            LostReason::Expired,
            LostReason::Released,
            LostReason::ConnectionLost,
            LostReason::QuorumLost,
            LostReason::MaxHoldReached,
            LostReason::ShutDown,
        ] {
            let hold = add(&Holds::default(), "k", FIXED);
            assert_eq!(hold.lost_reason(), None);
            assert!(hold.mark_lost(reason));
            assert_eq!(hold.lost_reason(), Some(reason));
        }
    }
}
