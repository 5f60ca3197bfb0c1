//! [`Channel`]: the waiters of one unlock channel on this client, their wake-up permits, and
//! where the channel's subscription stands.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::{watch, Semaphore};

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

/// Which local waiters a message on a channel wakes: what its payload means depends on the
/// kind of object whose channel it is (Redisson's `LockPubSub`, `SemaphorePubSub` and
/// `CountDownLatchPubSub`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// A lock's unlock channel: `0` wakes one waiter (the lock is free for one), `1` (a read
    /// unlock) every waiter.
    Lock,
    /// A semaphore's channel, whose payload is a number of permits (the count after a
    /// release, or the permits added): above 0 it wakes every waiter, since each may want
    /// a different number of permits and only its own try can tell; 0 or below wakes
    /// nobody (no permit came free).
    Permits,
    /// A count-down latch's channel: every message (`0`: the count reached zero; `1`: a new
    /// count, or the latch deleted) wakes every waiter to read the count again.
    All,
}

/// The waiters of one channel on this client.
#[derive(Debug)]
pub(super) struct Channel {
    /// What a message wakes.
    wake: Wake,
    /// Wake-up permits: one per unlock message, capped at the number of waiters.
    wakeups: Semaphore,
    pub(super) waiters: AtomicUsize,
    subscribed: watch::Sender<Subscribed>,
    /// The channel lost a confirmed subscription (its connection dropped, its slot moved):
    /// messages published until it is confirmed again were not delivered.
    gap: AtomicBool,
}

impl Channel {
    pub(super) fn new(wake: Wake) -> Self {
        Channel {
            wake,
            wakeups: Semaphore::new(0),
            waiters: AtomicUsize::new(0),
            subscribed: watch::Sender::new(Subscribed::Pending),
            gap: AtomicBool::new(false),
        }
    }

    /// A message with `payload` arrived: wakes the waiters it is for (see [`Wake`]).
    pub(super) fn on_message(&self, payload: &[u8]) {
        match self.wake {
            Wake::Lock if payload == b"1" => self.wake_all(),
            Wake::Lock => self.wake_one(),
            Wake::Permits => {
                let freed = std::str::from_utf8(payload)
                    .ok()
                    .and_then(|text| text.parse::<i64>().ok());
                // A payload that is not a number is not Redisson's: re-check rather than miss it.
                if freed.map_or(true, |freed| freed > 0) {
                    self.wake_all();
                }
            }
            Wake::All => self.wake_all(),
        }
    }

    /// Wakes one waiter (an unlock message: the lock is free for one).
    pub(super) fn wake_one(&self) {
        // A permit nobody will take only costs a spurious retry, but unbounded permits would
        // turn later waits into polling; keep at most one per waiter.
        if self.wakeups.available_permits() < self.waiters.load(Ordering::Acquire) {
            self.wakeups.add_permits(1);
        }
    }

    /// Wakes every waiter to re-check the lock.
    pub(super) fn wake_all(&self) {
        let missing = self
            .waiters
            .load(Ordering::Acquire)
            .saturating_sub(self.wakeups.available_permits());
        self.wakeups.add_permits(missing);
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
            self.wake_all();
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
