//! [`Channel`]: the waiters of one unlock channel on this client, their wake-up permits, and
//! where the channel's subscription stands.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::{watch, Semaphore};

use crate::util::metrics;

/// Where a channel's subscription stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Subscribed {
    /// Asked for, or to be asked for once its node is known and connected.
    Pending,
    /// Redis confirmed it, on the node that owns the channel.
    Confirmed,
    /// The user may not subscribe to it (ACL): its waiters are told at once, and the
    /// connection, which is fine, is kept.
    Refused,
}

/// The waiters of one channel on this client.
#[derive(Debug)]
pub(super) struct Channel {
    /// Wake-up permits: one per unlock message, capped at the number of waiters.
    wakeups: Semaphore,
    pub(super) waiters: AtomicUsize,
    subscribed: watch::Sender<Subscribed>,
    /// The channel lost a confirmed subscription (its connection dropped, its slot moved):
    /// messages published until it is confirmed again were not delivered.
    gap: AtomicBool,
}

impl Channel {
    pub(super) fn new() -> Self {
        Channel {
            wakeups: Semaphore::new(0),
            waiters: AtomicUsize::new(0),
            subscribed: watch::Sender::new(Subscribed::Pending),
            gap: AtomicBool::new(false),
        }
    }

    /// Wakes one waiter (an unlock message: the lock is free for one); how many it woke.
    pub(super) fn wake_one(&self) -> usize {
        // A permit nobody will take only costs a spurious retry, but unbounded permits would
        // turn later waits into polling; keep at most one per waiter.
        if self.wakeups.available_permits() < self.waiters.load(Ordering::Acquire) {
            self.wakeups.add_permits(1);
            return 1;
        }
        0
    }

    /// Wakes every waiter to re-check the lock; how many it woke.
    pub(super) fn wake_all(&self) -> usize {
        let missing = self
            .waiters
            .load(Ordering::Acquire)
            .saturating_sub(self.wakeups.available_permits());
        self.wakeups.add_permits(missing);
        missing
    }

    /// Adds one permit whatever the count: a waiter leaving with a wake-up it did not use
    /// hands it on.
    pub(super) fn pass_on_wakeup(&self) {
        self.wakeups.add_permits(1);
    }

    pub(super) fn wakeups(&self) -> &Semaphore {
        &self.wakeups
    }

    pub(super) fn state(&self) -> Subscribed {
        *self.subscribed.borrow()
    }

    pub(super) fn watch(&self) -> watch::Receiver<Subscribed> {
        self.subscribed.subscribe()
    }

    /// Redis confirmed the subscription. If it had lost an earlier one, every waiter is
    /// woken to re-check the lock: an unlock published in the gap was not delivered.
    pub(super) fn confirm(&self) {
        let was = self.subscribed.send_replace(Subscribed::Confirmed);
        if was != Subscribed::Confirmed && self.gap.swap(false, Ordering::AcqRel) {
            metrics::resubscribed();
            metrics::woken("reconnect", self.wake_all() as u64);
        }
    }

    /// The subscription is gone or moving (connection lost, slot moved, listener task
    /// restarted): it is to be asked for again.
    pub(super) fn unconfirm(&self) {
        if self.subscribed.send_replace(Subscribed::Pending) == Subscribed::Confirmed {
            self.gap.store(true, Ordering::Release);
        }
    }

    /// Redis refused the subscription (ACL).
    pub(super) fn refuse(&self) {
        self.subscribed.send_replace(Subscribed::Refused);
    }
}
