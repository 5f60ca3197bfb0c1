//! [`RLock`]: the reentrant lock, with Redisson's `RLock` layout.

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use tracing::instrument;

use crate::acquire::acquire;
use crate::client::Client;
use crate::error::{LostReason, Result};
use crate::guard::LockGuard;
use crate::hold::Lease;
use crate::names::LockNames;
use crate::owner::current_owner_field;
use crate::{scripts, validate};

/// A reentrant distributed lock, shared with every process (Rust or Java/Redisson) that
/// names the same key.
///
/// The lock is a Redis hash at the key: field `<client-uuid>:<task-id>`, value the number of
/// holds. The task that holds it may take it again (each call returns a guard, and the lock
/// frees when the last is released); any other task, here or elsewhere, waits.
///
/// Waiting never polls: waiters subscribe to the lock's unlock channel and are woken by
/// the release, or re-check when the holder's lease would have run out.
///
/// Cheap to clone; made by [`Client::lock`].
///
/// ```no_run
/// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
/// let lock = client.lock("order:1001");
/// let outer = lock.lock().await?;
/// let inner = lock.lock().await?; // same task: re-entry, no wait
/// assert_eq!(lock.hold_count().await?, 2);
/// inner.unlock().await?;
/// outer.unlock().await?;
/// assert!(!lock.is_locked().await?);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RLock {
    client: Client,
    name: Arc<str>,
    /// `None` for an invalid name, reported by the first call.
    names: Option<Arc<LockNames>>,
}

impl std::fmt::Debug for RLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RLock").field("name", &self.name).finish()
    }
}

impl RLock {
    pub(crate) fn new(client: Client, name: &str) -> Self {
        let names = validate::lock_name(name)
            .ok()
            .map(|()| Arc::new(LockNames::new(&client.inner.settings.key_prefix, name)));
        RLock {
            client,
            name: name.into(),
            names,
        }
    }

    /// The lock's name, as given to [`Client::lock`] (without the key prefix).
    pub fn name(&self) -> &str {
        &self.name
    }

    fn names(&self) -> Result<&Arc<LockNames>> {
        match &self.names {
            Some(names) => Ok(names),
            None => Err(validate::lock_name(&self.name)
                .expect_err("only a rejected name leaves the names unset")),
        }
    }

    fn watchdog_lease(&self) -> Lease {
        Lease::Watchdog(self.client.inner.watchdog.lease_ms())
    }

    fn fixed_lease(lease: Duration) -> Result<Lease> {
        validate::lease_millis("lease", lease).map(Lease::Fixed)
    }

    /// Takes the lock, waiting as long as it takes. The watchdog keeps it alive (lease:
    /// the client's watchdog timeout, 30 s by default, renewed every third of it) until the
    /// guard is released or dropped.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty name; a connection error when Redis cannot
    /// be reached after the configured retries; [`Error::Timeout`](crate::Error::Timeout) when the unlock
    /// subscription cannot be made.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves no subscription behind, and a lock it took in its
    /// last moment is released at once.
    #[instrument(level = "debug", skip(self), fields(lock = %self.name))]
    pub async fn lock(&self) -> Result<LockGuard> {
        let names = self.names()?;
        let guard = acquire(&self.client, names, self.watchdog_lease(), None).await?;
        Ok(guard.expect("an unbounded wait ends with the lock or an error"))
    }

    /// Takes the lock with a fixed lease, waiting as long as it takes. No watchdog: the lock
    /// frees itself when the lease runs out, and the guard reports it lost.
    ///
    /// A re-entry into a lock the calling task holds under the watchdog stays under the
    /// watchdog: a nested call cannot shorten what the outer one was promised.
    ///
    /// # Errors
    /// As [`lock`](RLock::lock); also [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a lease under 1 ms or
    /// over ten years.
    ///
    /// # Cancel safety
    /// As [`lock`](RLock::lock).
    #[instrument(level = "debug", skip(self), fields(lock = %self.name))]
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        let lease = Self::fixed_lease(lease)?;
        let names = self.names()?;
        let guard = acquire(&self.client, names, lease, None).await?;
        Ok(guard.expect("an unbounded wait ends with the lock or an error"))
    }

    /// One attempt, no waiting: `Ok(None)` when someone else holds the lock. Watchdog lease.
    ///
    /// # Errors
    /// As [`lock`](RLock::lock).
    ///
    /// # Cancel safety
    /// As [`lock`](RLock::lock).
    #[instrument(level = "debug", skip(self), fields(lock = %self.name))]
    pub async fn try_lock(&self) -> Result<Option<LockGuard>> {
        let names = self.names()?;
        acquire(
            &self.client,
            names,
            self.watchdog_lease(),
            Some(Duration::ZERO),
        )
        .await
    }

    /// Waits up to `wait` for the lock: `Ok(None)` if it stayed held that long. Watchdog
    /// lease. A `wait` too large to add to the clock waits without bound.
    ///
    /// # Errors
    /// As [`lock`](RLock::lock).
    ///
    /// # Cancel safety
    /// As [`lock`](RLock::lock).
    #[instrument(level = "debug", skip(self), fields(lock = %self.name))]
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        let names = self.names()?;
        acquire(&self.client, names, self.watchdog_lease(), Some(wait)).await
    }

    /// Waits up to `wait` for the lock and takes it with a fixed `lease` (no watchdog).
    ///
    /// # Errors
    /// As [`lock_with_lease`](RLock::lock_with_lease).
    ///
    /// # Cancel safety
    /// As [`lock`](RLock::lock).
    #[instrument(level = "debug", skip(self), fields(lock = %self.name))]
    pub async fn try_lock_with(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        let lease = Self::fixed_lease(lease)?;
        let names = self.names()?;
        acquire(&self.client, names, lease, Some(wait)).await
    }

    /// Deletes the lock whoever holds it and wakes one waiter. Returns whether it was held.
    /// Guards of this client on the lock report it lost at once ([`LostReason::Released`]);
    /// other clients' guards when their watchdog next renews.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty name; a connection error.
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the lock may or may not have been deleted.
    #[instrument(level = "debug", skip(self), fields(lock = %self.name))]
    pub async fn force_unlock(&self) -> Result<bool> {
        let names = self.names()?;
        let hit = self.client.inner.holds.holds_of(&names.key);
        let deleted = self
            .client
            .inner
            .connections
            .with_retries(|conn| scripts::force_unlock(conn, &names.key, &names.channel))
            .await?;
        if deleted {
            hit.iter().for_each(|hold| {
                hold.mark_lost(LostReason::Released);
            });
        }
        Ok(deleted)
    }

    /// Whether anyone holds the lock.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty name; a connection error.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn is_locked(&self) -> Result<bool> {
        let names = self.names()?;
        self.query(|mut conn| async move { conn.exists(&*names.key).await })
            .await
    }

    /// Whether the calling task holds the lock.
    ///
    /// # Errors
    /// As [`is_locked`](RLock::is_locked).
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn is_held_by_current_task(&self) -> Result<bool> {
        let names = self.names()?;
        let owner = current_owner_field(&self.client.inner.id_text);
        self.query(|mut conn| {
            let owner = owner.clone();
            async move { conn.hexists(&*names.key, &*owner).await }
        })
        .await
    }

    /// How many holds the calling task has on the lock (0 when it holds none).
    ///
    /// # Errors
    /// As [`is_locked`](RLock::is_locked).
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn hold_count(&self) -> Result<u32> {
        let names = self.names()?;
        let owner = current_owner_field(&self.client.inner.id_text);
        let count: Option<u32> = self
            .query(|mut conn| {
                let owner = owner.clone();
                async move { conn.hget(&*names.key, &*owner).await }
            })
            .await?;
        Ok(count.unwrap_or(0))
    }

    /// How long until the lock's lease runs out: `None` when it is not held (or, if a
    /// foreign client wrote it, has no expiry).
    ///
    /// # Errors
    /// As [`is_locked`](RLock::is_locked).
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        let names = self.names()?;
        let pttl: i64 = self
            .query(|mut conn| async move { conn.pttl(&*names.key).await })
            .await?;
        Ok(u64::try_from(pttl).ok().map(Duration::from_millis))
    }

    async fn query<T, F, Fut>(&self, operation: F) -> Result<T>
    where
        F: FnMut(redis::aio::MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        self.client.inner.connections.with_retries(operation).await
    }
}
