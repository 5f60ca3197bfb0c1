//! [`DistributedLock`] and [`DistributedGuard`]: what every lock and every group of locks
//! offers, for code that takes "a lock" and may be given an [`RLock`](crate::RLock), a
//! [`FairLock`](crate::FairLock) or a [`RedLock`](crate::RedLock).
//!
//! The acquire methods are written here once: a lock type only says how one acquire with
//! a given lease and wait is done.

use std::future::Future;
use std::time::Duration;

use crate::error::{LostReason, Result};
use crate::util::validate;

/// A lock or a group of locks: something that can be taken, waiting or not, under the
/// watchdog or with a fixed lease. Implemented by [`Lock`](crate::Lock) (every kind) and
/// by [`RedLock`](crate::RedLock) and [`MultiLock`](crate::MultiLock). Sealed.
///
/// Each method is also an inherent method of those types, documented there (errors,
/// cancel safety); the trait is for code generic over them, such as a job runner that
/// takes the lock its caller chose:
///
/// ```no_run
/// use redis_rlock::{DistributedGuard, DistributedLock};
///
/// async fn run_exclusively(lock: &impl DistributedLock) -> redis_rlock::Result<()> {
///     let guard = lock.lock().await?;
///     // ... the critical section ...
///     guard.unlock().await
/// }
///
/// # async fn demo(client: redis_rlock::Client, masters: Vec<redis_rlock::Client>) -> redis_rlock::Result<()> {
/// run_exclusively(&client.lock("report")).await?;
/// run_exclusively(&client.fair_lock("jobs")).await?;
/// let quorum = redis_rlock::RedLock::new(masters.iter().map(|m| m.lock("report")).collect());
/// run_exclusively(&quorum).await?;
/// # Ok(()) }
/// ```
pub trait DistributedLock: sealed::Sealed + Clone + Send + Sync + 'static {
    /// What holding the lock gives: [`LockGuard`](crate::LockGuard) for one lock,
    /// [`GroupGuard`](crate::GroupGuard) for a group.
    type Guard: DistributedGuard;

    /// The lock's name (without the key prefix); a group's is its first lock's.
    fn name(&self) -> &str;

    /// One acquire: a fixed lease in ms (`None`: the watchdog's), waiting up to `wait`
    /// (`None`: as long as it takes). `Ok(None)`: the wait ran out.
    #[doc(hidden)]
    fn acquire(
        &self,
        fixed_lease_ms: Option<u64>,
        wait: Option<Duration>,
    ) -> impl Future<Output = Result<Option<Self::Guard>>> + Send;

    /// Takes the lock under the watchdog, waiting as long as it takes.
    fn lock(&self) -> impl Future<Output = Result<Self::Guard>> + Send {
        async move { unbounded(self.acquire(None, None).await) }
    }

    /// Takes the lock with a fixed lease (no watchdog), waiting as long as it takes.
    fn lock_with_lease(&self, lease: Duration) -> impl Future<Output = Result<Self::Guard>> + Send {
        async move {
            let lease = validate::lease_millis("lease", lease)?;
            unbounded(self.acquire(Some(lease), None).await)
        }
    }

    /// One attempt, no waiting: `Ok(None)` when the lock is held elsewhere.
    fn try_lock(&self) -> impl Future<Output = Result<Option<Self::Guard>>> + Send {
        self.acquire(None, Some(Duration::ZERO))
    }

    /// Waits up to `wait` for the lock: `Ok(None)` if it stayed held elsewhere that long.
    fn try_lock_for(
        &self,
        wait: Duration,
    ) -> impl Future<Output = Result<Option<Self::Guard>>> + Send {
        self.acquire(None, Some(wait))
    }

    /// Waits up to `wait` for the lock and takes it with a fixed `lease` (no watchdog).
    fn try_lock_with(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> impl Future<Output = Result<Option<Self::Guard>>> + Send {
        async move {
            let lease = validate::lease_millis("lease", lease)?;
            self.acquire(Some(lease), Some(wait)).await
        }
    }
}

/// A held lock or group: what every guard offers. Implemented by
/// [`LockGuard`](crate::LockGuard) and [`GroupGuard`](crate::GroupGuard). Sealed.
pub trait DistributedGuard: sealed::Sealed + Send + Sync + 'static {
    /// Releases the hold; [`Error::LockLost`](crate::Error::LockLost) when it was lost
    /// before.
    fn unlock(self) -> impl Future<Output = Result<()>> + Send;

    /// Resolves when the lock is lost, with the reason; never for a lock that stays held.
    fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static;

    /// Whether the lock is known to be, or must be assumed, lost.
    fn is_lost(&self) -> bool;

    /// The instant until which the lock is certainly still held, on this process's
    /// monotonic clock.
    fn valid_until(&self) -> std::time::Instant;

    /// The fencing token of this acquire, for fenced locks.
    fn fencing_token(&self) -> Option<u64>;
}

/// The guard of a wait without bound, which ends with the lock or an error.
fn unbounded<G>(outcome: Result<Option<G>>) -> Result<G> {
    outcome.map(|guard| guard.expect("an unbounded wait ends with the lock or an error"))
}

/// Implements [`DistributedGuard`] for a guard type by its inherent methods of the same
/// names, which carry the docs.
macro_rules! guard_by_inherent_methods {
    ($guard:ty) => {
        impl $crate::locks::distributed::sealed::Sealed for $guard {}

        impl $crate::locks::distributed::DistributedGuard for $guard {
            fn unlock(self) -> impl std::future::Future<Output = $crate::error::Result<()>> + Send {
                <$guard>::unlock(self)
            }

            fn lost(
                &self,
            ) -> impl std::future::Future<Output = $crate::error::LostReason> + Send + 'static {
                <$guard>::lost(self)
            }

            fn is_lost(&self) -> bool {
                <$guard>::is_lost(self)
            }

            fn valid_until(&self) -> std::time::Instant {
                <$guard>::valid_until(self)
            }

            fn fencing_token(&self) -> Option<u64> {
                <$guard>::fencing_token(self)
            }
        }
    };
}
pub(crate) use guard_by_inherent_methods;

pub(crate) mod sealed {
    /// Only this crate's locks and guards implement the traits.
    pub trait Sealed {}
}
