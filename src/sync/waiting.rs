//! Waiting for permits or for a latch to open, on the crate's one waiting loop
//! ([`wait_for`]): try, subscribe to the channel, try again,
//! then wait for a message or the re-check bound, whichever comes first.
//!
//! A try that finds nothing to take answers how long to wait at most before the next one:
//! [`RECHECK`], or sooner for an expirable semaphore whose nearest permit expires sooner
//! (no message announces an expiry). Messages wake every local waiter of the channel (see
//! [`Wake`]); a resubscription after a lost connection or a moved slot does too, since
//! messages of the gap are gone.

use crate::util::lock_metrics::LockMetrics;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::client_core::Core;
use crate::error::{Error, Result};
use crate::locks::acquire::Timed;
use crate::locks::wait::{deadline_after, wait_for, Contender, Listening, Tried, WakeUps};
use crate::protocol::names::SyncNames;
use crate::sync::handle::Handle;
use crate::transport::connections::Connections;
use crate::transport::pubsub::Wake;

/// The longest a waiter waits without a message before it tries again: the safety net
/// for a message lost in a way the listener cannot see (Redisson's semaphore and latch
/// waits have none, and wait until the next message). A lost connection or a moved slot
/// is seen, and wakes the waiters at once.
pub const RECHECK: Duration = Duration::from_secs(5);

/// One try of a waiting call: taking permits, or reading a latch's count.
pub(crate) trait Try: Send {
    /// What a try that got through returns.
    type Output: Send;

    /// One try on the synchronizer `names` of the client `core`: `Busy` with the longest
    /// wait before the next.
    fn try_once(
        &mut self,
        core: &Arc<Core>,
        names: &Arc<SyncNames>,
    ) -> impl Future<Output = Result<Tried<Self::Output>>> + Send;

    /// Whether a try that failed with `error` may be sent again.
    fn may_retry(&self, _error: &Error) -> bool {
        true
    }
}

/// Tries `tried` until it gets through, waiting up to `wait` (`None`: as long as it takes)
/// for messages on the channel of `handle`'s synchronizer; `Ok(None)` when the wait ran
/// out. The user's permissions are checked in each try, so that a wait rides out an
/// outage from its start.
pub(crate) async fn wait_until<T: Try>(
    handle: &Handle,
    wake: Wake,
    tried: T,
    wait: Option<Duration>,
) -> Result<Option<T::Output>> {
    let (core, names) = (&handle.core, handle.names()?);
    let mut timed = Timed::start(&names.metrics);
    let _admitted = timed.admit(core)?;
    let mut waiter = Waiter {
        core,
        names,
        wake,
        tried,
        wake_ups: WakeUps::default(),
    };
    let outcome = wait_for(&mut waiter, deadline_after(wait)).await;
    timed.ended(&outcome);
    outcome
}

/// A waiting call, as the waiting loop drives it; its subscription ends with it.
struct Waiter<'a, T> {
    core: &'a Arc<Core>,
    names: &'a Arc<SyncNames>,
    wake: Wake,
    tried: T,
    wake_ups: WakeUps,
}

impl<T: Try> Contender for Waiter<'_, T> {
    type Guard = T::Output;

    async fn attempt(&mut self) -> Result<Tried<T::Output>> {
        // At the kind's first use, inside the try: a check that cannot reach Redis is
        // ridden out within the caller's wait like the try itself.
        self.core
            .commands
            .ensure_sync(&self.core.connections, self.names)
            .await?;
        // Before the try: a message that comes while it runs makes the next wait return
        // at once, whether or not the try saw what the message announced.
        self.wake_ups.trying();
        self.tried.try_once(self.core, self.names).await
    }

    fn may_retry(&self, error: &Error) -> bool {
        self.tried.may_retry(error)
    }

    async fn listen(&mut self, remaining: Duration) -> Result<Listening> {
        let channel = || self.names.channel.clone();
        (self.wake_ups)
            .listen(self.core, channel, self.wake, remaining)
            .await
    }

    async fn wait(&mut self, bound: Duration) {
        self.wake_ups.wait(bound).await;
    }

    fn wakeups_used(&mut self) {
        self.wake_ups.used();
    }

    fn pacing(&self) -> &Connections {
        &self.core.connections
    }

    fn metrics(&self) -> &LockMetrics {
        &self.names.metrics
    }
}
