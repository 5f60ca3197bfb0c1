//! [`Subscription`]: one waiter's registration on a channel.

use std::sync::Arc;
use std::time::Duration;

use crate::transport::pubsub::channel::Channel;
use crate::transport::pubsub::hub::Hub;
use crate::util::metrics;

/// One waiter's registration on a channel; dropping it deregisters, and unsubscribes when
/// it was the channel's last waiter on this client.
pub(crate) struct Subscription {
    pub(super) hub: Arc<Hub>,
    pub(super) name: Arc<str>,
    pub(super) channel: Arc<Channel>,
    /// Took a wake-up it has not acted on yet: if dropped now, it passes it on.
    pub(super) holds_wakeup: bool,
}

impl Subscription {
    /// Waits for an unlock message, at most `limit`. Returns true when woken by a message.
    ///
    /// # Cancel safety
    /// Cancel safe: a wake-up taken by a cancelled wait is passed on by `Drop`.
    pub(crate) async fn wait(&mut self, limit: Duration) -> bool {
        match tokio::time::timeout(limit, self.channel.wakeups().acquire()).await {
            Ok(Ok(permit)) => {
                permit.forget();
                self.holds_wakeup = true;
                true
            }
            // The semaphore is never closed; a timeout is the only other outcome.
            _ => {
                metrics::woken("ttl_bound", 1);
                false
            }
        }
    }

    /// The waiter acted on its wake-up (it retried the acquire).
    pub(crate) fn wakeup_used(&mut self) {
        self.holds_wakeup = false;
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
