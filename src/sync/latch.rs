//! [`CountDownLatch`]: Redisson's `RCountDownLatch`, a count at the name that opens the
//! latch for every waiter when it reaches zero.

use std::sync::Arc;
use std::time::Duration;

use crate::client_core::Core;
use crate::error::Result;
use crate::locks::wait::Tried;
use crate::protocol::names::{SyncKind, SyncNames};
use crate::protocol::scripts;
use crate::sync::call::{self, Kind};
use crate::sync::check;
use crate::sync::handle::Handle;
use crate::sync::waiting::{wait_until, Try, RECHECK};
use crate::transport::pubsub::Wake;

/// A distributed count-down latch: tasks anywhere (Rust, or Java with Redisson's
/// `RCountDownLatch` on the same name) wait until the count reaches zero.
///
/// The count is set once with [`try_set_count`](CountDownLatch::try_set_count) and can be
/// set again after it reached zero (the key is then gone), unlike a
/// `java.util.concurrent.CountDownLatch`. A missing count reads as 0: waiting on a latch
/// nobody set returns at once. The layout, messages and waiting bounds are in the
/// [`sync`](crate::sync) docs.
///
/// Cheap to clone; made by [`Client::count_down_latch`](crate::Client::count_down_latch).
///
/// ```no_run
/// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
/// let batch = client.count_down_latch("batch:42");
/// batch.try_set_count(3).await?;
/// // ... three workers each call `batch.count_down().await?` when done ...
/// # for _ in 0..3 { batch.count_down().await?; }
/// batch.wait().await?;                      // returns once the count is 0
/// assert_eq!(batch.count().await?, 0);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    handle: Handle,
}

impl std::fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.handle.debug("CountDownLatch", f)
    }
}

impl CountDownLatch {
    pub(crate) fn new(core: Arc<Core>, name: &str) -> Self {
        CountDownLatch {
            handle: Handle::new(core, SyncKind::Latch, "latch", name),
        }
    }

    /// The latch's name, as given to
    /// [`Client::count_down_latch`](crate::Client::count_down_latch) (without the key
    /// prefix).
    pub fn name(&self) -> &str {
        &self.handle.name
    }

    /// Sets the count, if the latch has none (a latch that reached zero has none): true
    /// when set, false when a count was there (nothing changed). 0 is allowed, and is
    /// written as Redisson writes it (an open latch whose key stays until deleted).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an invalid name or a
    /// count above `i64::MAX` (Redis' integers, Redisson's `long`), with nothing sent;
    /// [`Error::NotALock`](crate::Error::NotALock) when the key holds other data; a
    /// connection error.
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the count may or may not have been set.
    #[tracing::instrument(level = "debug", skip(self), fields(latch = %self.handle.name))]
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        let count = check::count(count)?;
        self.handle
            .try_set_count("setting the count of", count)
            .await
    }

    /// Counts down by one; at zero the latch opens (its key is deleted) and every waiter
    /// is told. Counting down a latch with no count does nothing.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an invalid name;
    /// [`Error::NotALock`](crate::Error::NotALock) when the key holds other data; a
    /// connection error (a try whose reply was lost is not sent again: it may have
    /// counted, and a second run would count twice; a Redis Cluster or Sentinel client sends
    /// it again with its request latch, see [retries](crate::sync#retries)).
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the count may or may not have gone down.
    #[tracing::instrument(level = "debug", skip(self), fields(latch = %self.handle.name))]
    pub async fn count_down(&self) -> Result<()> {
        self.handle
            .call("counting down", Kind::CountChange, |conn, names, latch| {
                scripts::count_down(conn, names, latch)
            })
            .await
            .map(drop)
    }

    /// The count: 0 when the latch is open (or was never set).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an invalid name;
    /// [`Error::NotALock`](crate::Error::NotALock) when the key holds other data; a
    /// connection error.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn count(&self) -> Result<u64> {
        self.handle.read_count().await
    }

    /// Waits as long as it takes for the count to reach zero (at once if it is zero).
    ///
    /// Waiting never polls: the waiter subscribes to the latch's channel, is woken by the
    /// count-down that opens it (and by a new count or a delete, to read the count again),
    /// and reads the count at least every [`RECHECK`] (5 s) in case
    /// a message was lost. Redisson's `await()` has no such bound.
    ///
    /// # Errors
    /// As [`count`](CountDownLatch::count); [`Error::Timeout`](crate::Error::Timeout) when
    /// the subscription cannot be made.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped wait leaves no subscription behind.
    #[tracing::instrument(level = "debug", skip(self), fields(latch = %self.handle.name))]
    pub async fn wait(&self) -> Result<()> {
        let opened = self.open_within(None).await?;
        debug_assert!(
            opened,
            "a wait without a deadline ends open or with an error"
        );
        Ok(())
    }

    /// Waits up to `wait` for the count to reach zero: true when it did, false when the
    /// wait ran out first. A `wait` too large to add to the clock waits without bound.
    ///
    /// # Errors
    /// As [`wait`](CountDownLatch::wait).
    ///
    /// # Cancel safety
    /// As [`wait`](CountDownLatch::wait).
    #[tracing::instrument(level = "debug", skip(self), fields(latch = %self.handle.name))]
    pub async fn wait_for(&self, wait: Duration) -> Result<bool> {
        self.open_within(Some(wait)).await
    }

    async fn open_within(&self, wait: Option<Duration>) -> Result<bool> {
        let opened = wait_until(&self.handle, Wake::All, Open, wait).await?;
        Ok(opened.is_some())
    }

    /// Deletes the latch's count, which opens it; its waiters are told (a message that
    /// Redisson's waiters take for a new count: they go on waiting until their next
    /// message). True when there was a count.
    ///
    /// # Errors
    /// As [`count`](CountDownLatch::count).
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the count may or may not have been deleted.
    #[tracing::instrument(level = "debug", skip(self), fields(latch = %self.handle.name))]
    pub async fn delete(&self) -> Result<bool> {
        self.handle.delete().await
    }
}

/// One look at the latch, as the waiting loop drives it: through when the count is zero.
struct Open;

impl Try for Open {
    type Output = ();

    async fn try_once(&mut self, core: &Arc<Core>, names: &Arc<SyncNames>) -> Result<Tried<()>> {
        // One read per try: the waiting loop retries what fails to reach Redis.
        let count = call::once(core, names, "reading", |conn| {
            scripts::read_count(conn, names)
        })
        .await?;
        Ok(if count <= 0 {
            Tried::Acquired(())
        } else {
            Tried::Busy(Some(RECHECK))
        })
    }
}
