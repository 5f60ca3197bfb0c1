//! The holds the watchdog renews, in slots it walks one batch at a time.
//!
//! Kept apart from the registry map on purpose. A round over the map had to walk all of it
//! under its shard locks to collect the holds, then come back to each hold once its batch
//! was answered: at 100,000 holds the second visit found every hold evicted from the cache
//! again, and that walk cost more client CPU than writing the renewals. Walking slots,
//! the watchdog copies out one batch's holds just before sending them and settles them
//! as soon as Redis answers, while they are still in the cache.
//!
//! A released hold leaves its slot at once, and the slot is reused by a later hold. A hold
//! that takes a slot behind a round's position waits for the next round, which is as soon
//! as a hold added just after the round began would wait anyway: a fresh acquire has a
//! whole lease ahead of it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use super::hold::Hold;
use crate::util::poison;

/// [`Hold::watch_slot`] of a hold that is in no slot.
pub(crate) const NOT_LISTED: usize = usize::MAX;

/// The watchdog holds of one client, one per slot; freed slots are reused.
#[derive(Debug, Default)]
pub(crate) struct WatchList {
    slots: Mutex<Slots>,
}

#[derive(Debug, Default)]
struct Slots {
    slots: Vec<Option<Arc<Hold>>>,
    /// Empty slots below `slots.len()`, reused before the list grows.
    free: Vec<usize>,
}

impl Slots {
    /// Empties slot `index`, which holds a hold.
    fn take_out(&mut self, index: usize) {
        self.slots[index] = None;
        if self.free.len() + 1 == self.slots.len() {
            // The last hold left: give the memory of a burst back.
            self.slots = Vec::new();
            self.free = Vec::new();
        } else {
            self.free.push(index);
        }
    }
}

impl WatchList {
    fn slots(&self) -> MutexGuard<'_, Slots> {
        poison::locked(&self.slots)
    }

    /// Puts `hold` in a slot, unless it has one.
    pub(crate) fn enlist(&self, hold: &Arc<Hold>) {
        // A re-entry finds its hold listed already: no lock taken. A hold leaves its slot at
        // its last release, which no re-entry races with, or once found lost, when a
        // re-entry that raced with that joins a lost hold either way.
        if hold.watch_slot.load(Ordering::Relaxed) != NOT_LISTED {
            return;
        }
        let mut slots = self.slots();
        if hold.watch_slot.load(Ordering::Relaxed) != NOT_LISTED {
            return;
        }
        let index = slots.free.pop().unwrap_or_else(|| {
            slots.slots.push(None);
            slots.slots.len() - 1
        });
        slots.slots[index] = Some(hold.clone());
        hold.watch_slot.store(index, Ordering::Relaxed);
    }

    /// Takes `hold` out of its slot, if it has one.
    pub(crate) fn delist(&self, hold: &Hold) {
        let mut slots = self.slots();
        let index = hold.watch_slot.swap(NOT_LISTED, Ordering::Relaxed);
        if index != NOT_LISTED {
            slots.take_out(index);
        }
    }

    /// How many holds are listed.
    pub(crate) fn len(&self) -> usize {
        let slots = self.slots();
        slots.slots.len() - slots.free.len()
    }

    /// The number of slots, empty ones included: where a round's walk ends.
    pub(crate) fn slot_count(&self) -> usize {
        self.slots().slots.len()
    }

    /// Up to `count` holds from the slots `from..end`, passing over empty slots and those
    /// `drop_out` picks, which leave their slots and are returned apart; and the slot to
    /// go on from.
    pub(crate) fn batch(
        &self,
        from: usize,
        end: usize,
        count: usize,
        drop_out: impl Fn(&Hold) -> bool,
    ) -> Gathered {
        let mut slots = self.slots();
        let end = end.min(slots.slots.len());
        let mut gathered = Gathered {
            kept: Vec::with_capacity(count.min(end.saturating_sub(from))),
            dropped: Vec::new(),
            next: from,
        };
        // `slots.len()`: dropping the last hold empties the list.
        while gathered.kept.len() < count && gathered.next < end.min(slots.slots.len()) {
            let index = gathered.next;
            gathered.next += 1;
            let Some(hold) = slots.slots[index].clone() else {
                continue;
            };
            if drop_out(&hold) {
                hold.watch_slot.store(NOT_LISTED, Ordering::Relaxed);
                slots.take_out(index);
                gathered.dropped.push(hold);
            } else {
                gathered.kept.push(hold);
            }
        }
        if gathered.next >= slots.slots.len() {
            // Nothing left to walk: the caller's walk is over.
            gathered.next = usize::MAX;
        }
        gathered
    }
}

/// What [`WatchList::batch`] found.
pub(crate) struct Gathered {
    pub(crate) kept: Vec<Arc<Hold>>,
    pub(crate) dropped: Vec<Arc<Hold>>,
    /// The slot after the last one looked at.
    pub(crate) next: usize,
}
