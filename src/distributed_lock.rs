//! [`DistributedLock`]: what every lock kind offers, for code generic over lock kinds.

use std::future::Future;
use std::time::Duration;

use crate::error::Result;
use crate::guard::LockGuard;
use crate::lock::{Lock, LockKind};

/// The operations every lock kind offers, with the meaning documented on [`Lock`].
///
/// For code that should work with any kind of lock, such as a job runner that takes the lock
/// its caller chose:
///
/// ```no_run
/// use redis_rlock::DistributedLock;
///
/// async fn run_exclusively(lock: &impl DistributedLock) -> redis_rlock::Result<()> {
///     let guard = lock.lock().await?;
///     // ... the critical section ...
///     guard.unlock().await
/// }
///
/// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
/// run_exclusively(&client.lock("report")).await?;
/// run_exclusively(&client.fair_lock("jobs")).await?;
/// # Ok(()) }
/// ```
pub trait DistributedLock: Clone + Send + Sync + 'static {
    /// The lock's name (without the key prefix). See [`Lock::name`].
    fn name(&self) -> &str;

    /// Takes the lock under the watchdog, waiting as long as it takes. See [`Lock::lock`].
    fn lock(&self) -> impl Future<Output = Result<LockGuard>> + Send;

    /// Takes the lock with a fixed lease, waiting as long as it takes. See
    /// [`Lock::lock_with_lease`].
    fn lock_with_lease(&self, lease: Duration) -> impl Future<Output = Result<LockGuard>> + Send;

    /// One attempt, no waiting. See [`Lock::try_lock`].
    fn try_lock(&self) -> impl Future<Output = Result<Option<LockGuard>>> + Send;

    /// Waits up to `wait`, under the watchdog. See [`Lock::try_lock_for`].
    fn try_lock_for(
        &self,
        wait: Duration,
    ) -> impl Future<Output = Result<Option<LockGuard>>> + Send;

    /// Waits up to `wait`, with a fixed lease. See [`Lock::try_lock_with`].
    fn try_lock_with(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> impl Future<Output = Result<Option<LockGuard>>> + Send;

    /// Deletes the lock whoever holds it. See [`Lock::force_unlock`].
    fn force_unlock(&self) -> impl Future<Output = Result<bool>> + Send;

    /// Whether anyone holds the lock. See [`Lock::is_locked`].
    fn is_locked(&self) -> impl Future<Output = Result<bool>> + Send;

    /// Whether the calling task holds the lock. See [`Lock::is_held_by_current_task`].
    fn is_held_by_current_task(&self) -> impl Future<Output = Result<bool>> + Send;

    /// How many holds the calling task has. See [`Lock::hold_count`].
    fn hold_count(&self) -> impl Future<Output = Result<u32>> + Send;

    /// How long until the lease runs out. See [`Lock::remaining_ttl`].
    fn remaining_ttl(&self) -> impl Future<Output = Result<Option<Duration>>> + Send;
}

impl<K: LockKind> DistributedLock for Lock<K> {
    fn name(&self) -> &str {
        Lock::name(self)
    }

    fn lock(&self) -> impl Future<Output = Result<LockGuard>> + Send {
        Lock::lock(self)
    }

    fn lock_with_lease(&self, lease: Duration) -> impl Future<Output = Result<LockGuard>> + Send {
        Lock::lock_with_lease(self, lease)
    }

    fn try_lock(&self) -> impl Future<Output = Result<Option<LockGuard>>> + Send {
        Lock::try_lock(self)
    }

    fn try_lock_for(
        &self,
        wait: Duration,
    ) -> impl Future<Output = Result<Option<LockGuard>>> + Send {
        Lock::try_lock_for(self, wait)
    }

    fn try_lock_with(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> impl Future<Output = Result<Option<LockGuard>>> + Send {
        Lock::try_lock_with(self, wait, lease)
    }

    fn force_unlock(&self) -> impl Future<Output = Result<bool>> + Send {
        Lock::force_unlock(self)
    }

    fn is_locked(&self) -> impl Future<Output = Result<bool>> + Send {
        Lock::is_locked(self)
    }

    fn is_held_by_current_task(&self) -> impl Future<Output = Result<bool>> + Send {
        Lock::is_held_by_current_task(self)
    }

    fn hold_count(&self) -> impl Future<Output = Result<u32>> + Send {
        Lock::hold_count(self)
    }

    fn remaining_ttl(&self) -> impl Future<Output = Result<Option<Duration>>> + Send {
        Lock::remaining_ttl(self)
    }
}
