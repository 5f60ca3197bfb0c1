//! [`Channel`]: the waiters of one unlock channel on this client, their wake-up permits, and
//! where the channel's subscription stands; [`Subscription`]: one waiter's registration on
//! a channel.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Semaphore};

use crate::transport::pubsub::hub::Hub;
use crate::util::metrics::{self, WakeUp};

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
    pub(super) wake: Wake,
    /// A lock's channel: wake-up permits, one per unlock message, capped at the number of
    /// waiters.
    pub(super) wakeups: Semaphore,
    /// Other channels, whose messages are for every waiter: a count of such messages (and
    /// resubscriptions), whose version each waiter's receiver marks seen when it tries.
    /// Permits would not do: a waiter that tries again and still cannot go could take a
    /// second permit meant for another, which then never tries.
    pub(super) generation: watch::Sender<u64>,
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
            generation: watch::Sender::new(0),
            waiters: AtomicUsize::new(0),
            subscribed: watch::Sender::new(Subscribed::Pending),
            gap: AtomicBool::new(false),
        }
    }

    /// A message with `payload` arrived: wakes the waiters it is for (see [`Wake`]); how
    /// many it woke.
    pub(super) fn on_message(&self, payload: &[u8]) -> usize {
        match self.wake {
            Wake::Lock if payload == b"1" => self.wake_all(),
            Wake::Lock => self.wake_one(),
            Wake::Permits => {
                let freed = std::str::from_utf8(payload)
                    .ok()
                    .and_then(|text| text.parse::<i64>().ok());
                // A payload that is not a number is not Redisson's: re-check rather than miss it.
                if freed.map_or(true, |freed| freed > 0) {
                    self.wake_all()
                } else {
                    0
                }
            }
            Wake::All => self.wake_all(),
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

    /// Wakes every waiter to re-check the lock (or the semaphore, or the latch); how many it
    /// woke.
    pub(super) fn wake_all(&self) -> usize {
        if self.wake != Wake::Lock {
            self.generation.send_modify(|generation| *generation += 1);
            return self.waiters.load(Ordering::Acquire);
        }
        let missing = self
            .waiters
            .load(Ordering::Acquire)
            .saturating_sub(self.wakeups.available_permits());
        self.wakeups.add_permits(missing);
        missing
    }

    /// How many times every waiter was woken (channels other than a lock's).
    #[cfg(test)]
    fn generation(&self) -> u64 {
        *self.generation.borrow()
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
            metrics::woken(WakeUp::Reconnect, self.wake_all() as u64);
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

/// One waiter's registration on a channel; dropping it deregisters, and unsubscribes when
/// it was the channel's last waiter on this client.
pub(crate) struct Subscription {
    pub(super) hub: Arc<Hub>,
    pub(super) name: Arc<str>,
    pub(super) channel: Arc<Channel>,
    /// Took a wake-up it has not acted on yet: if dropped now, it passes it on.
    pub(super) holds_wakeup: bool,
    /// On a channel whose messages wake every waiter: the channel's generation, marked
    /// seen when this waiter tries (see [`Subscription::trying`]).
    pub(super) moves: watch::Receiver<u64>,
}

/// What set a wait's limit: what a wait that no message ended is counted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    /// The holder's TTL (or the re-check interval of a lock without one): the lock may be
    /// free by then, unannounced, so the waiter re-checks ([`WakeUp::TtlBound`]).
    HolderTtl,
    /// The caller's own deadline, before the holder's TTL: the wait ends there whatever
    /// the messages do ([`WakeUp::Deadline`]).
    CallerDeadline,
}

impl Limit {
    /// What sets a wait of `bound` by a caller with `remaining` time left: its own
    /// deadline when the wait runs to it, else the holder's TTL.
    pub(crate) fn of(bound: Duration, remaining: Duration) -> Limit {
        if bound >= remaining {
            Limit::CallerDeadline
        } else {
            Limit::HolderTtl
        }
    }
}

impl Subscription {
    /// Waits for an unlock message, at most `limit`, which `set_by` says what set. Returns
    /// true when woken by a message.
    ///
    /// # Cancel safety
    /// Cancel safe: a wake-up taken by a cancelled wait is passed on by `Drop`.
    pub(crate) async fn wait_within(&mut self, limit: Duration, set_by: Limit) -> bool {
        if self.channel.wake != Wake::Lock {
            // At once for a message since the last try; the sender lives as long as this.
            return tokio::time::timeout(limit, self.moves.changed())
                .await
                .is_ok();
        }
        match tokio::time::timeout(limit, self.channel.wakeups.acquire()).await {
            Ok(Ok(permit)) => {
                permit.forget();
                self.holds_wakeup = true;
                true
            }
            // The semaphore is never closed; a timeout is the only other outcome.
            _ => {
                let source = match set_by {
                    Limit::HolderTtl => WakeUp::TtlBound,
                    Limit::CallerDeadline => WakeUp::Deadline,
                };
                metrics::woken(source, 1);
                false
            }
        }
    }

    /// The waiter acted on its wake-up (it retried the acquire).
    pub(crate) fn wakeup_used(&mut self) {
        self.holds_wakeup = false;
    }

    /// The waiter is about to try (on a channel whose messages wake every waiter): a message
    /// from now on wakes its next [`wait_within`](Subscription::wait_within), and those
    /// before do not, since this try sees what they announced.
    pub(crate) fn trying(&mut self) {
        self.moves.borrow_and_update();
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if self.holds_wakeup {
            // This waiter was told the lock is free but leaves without trying it: hand the
            // news to another local waiter (whatever the count), or it would sit until the
            // holder's TTL.
            self.channel.wakeups.add_permits(1);
        }
        self.hub.deregister(&self.name, &self.channel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_waiters(wake: Wake, waiters: usize) -> Channel {
        let channel = Channel::new(wake);
        channel.waiters.store(waiters, Ordering::Release);
        channel
    }

    #[test]
    fn a_lock_message_wakes_one_waiter_and_a_read_unlock_all() {
        let channel = with_waiters(Wake::Lock, 3);
        channel.on_message(b"0");
        assert_eq!(channel.wakeups.available_permits(), 1);
        channel.on_message(b"1");
        assert_eq!(channel.wakeups.available_permits(), 3);
        channel.on_message(b"0");
        assert_eq!(
            channel.wakeups.available_permits(),
            3,
            "at most one per waiter"
        );
        assert_eq!(channel.generation(), 0);
    }

    #[test]
    fn a_semaphore_message_wakes_every_waiter_when_permits_came_free() {
        let channel = with_waiters(Wake::Permits, 3);
        channel.on_message(b"0");
        channel.on_message(b"-2");
        assert_eq!(channel.generation(), 0, "no permit came free");
        channel.on_message(b"2");
        assert_eq!(channel.generation(), 1);
        channel.on_message(b"not a number");
        assert_eq!(channel.generation(), 2, "re-checked rather than missed");
        assert_eq!(channel.wakeups.available_permits(), 0);
    }

    #[test]
    fn a_latch_message_wakes_every_waiter() {
        let channel = with_waiters(Wake::All, 2);
        channel.on_message(b"0");
        channel.on_message(b"1");
        assert_eq!(channel.generation(), 2);
    }

    #[test]
    fn a_resubscription_wakes_every_waiter() {
        for wake in [Wake::Lock, Wake::Permits, Wake::All] {
            let channel = with_waiters(wake, 2);
            channel.confirm();
            channel.unconfirm();
            channel.confirm();
            let woken = channel.wakeups.available_permits() == 2 || channel.generation() == 1;
            assert!(woken, "{wake:?}");
        }
    }
}
