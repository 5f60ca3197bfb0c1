//! [`Subscription`]: one waiter's registration on a channel.

use std::sync::Arc;
use std::time::Duration;

use crate::transport::pubsub::channel::{Channel, Wake};
use crate::transport::pubsub::hub::Hub;
use crate::util::metrics::{self, WakeUp};

/// One waiter's registration on a channel; dropping it deregisters, and unsubscribes when
/// it was the channel's last waiter on this client.
pub(crate) struct Subscription {
    pub(super) hub: Arc<Hub>,
    pub(super) name: Arc<str>,
    pub(super) channel: Arc<Channel>,
    /// Took a wake-up it has not acted on yet: if dropped now, it passes it on.
    pub(super) holds_wakeup: bool,
    /// On a channel whose messages wake every waiter: the channel's generation when this
    /// waiter last tried (see [`Subscription::trying`]).
    pub(super) seen: u64,
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
            // Listening before looking, so that a message in between is not missed.
            let moved = self.channel.moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            if self.channel.generation() != self.seen {
                return true;
            }
            return tokio::time::timeout(limit, moved).await.is_ok();
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
    /// from now on wakes its next [`wait`](Subscription::wait), and those before do not,
    /// since this try sees what they announced.
    pub(crate) fn trying(&mut self) {
        self.seen = self.channel.generation();
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if self.holds_wakeup {
            // This waiter was told the lock is free but leaves without trying it: hand the
            // news to another local waiter, or it would sit until the holder's TTL.
            self.channel.pass_on_wakeup();
        }
        self.hub.deregister(&self.name, &self.channel);
    }
}
