//! Every call of a lock, each made once and bounded in time, for promises every entry point
//! keeps.

use std::time::Duration;

use crate::wait::bounded;

/// Every acquire method of `lock`, each called once (waiting up to `wait` where the method
/// waits, with `lease` where it takes one), and what it returned, guards dropped: for
/// promises every entry point keeps (refused input, permissions, a full Redis).
pub async fn every_acquire(
    lock: &impl redis_rlock::DistributedLock<Guard = redis_rlock::LockGuard>,
    wait: Duration,
    lease: Duration,
) -> Vec<(&'static str, redis_rlock::Result<()>)> {
    vec![
        ("lock()", bounded("lock()", lock.lock()).await.map(drop)),
        (
            "lock_with_lease()",
            bounded("lock_with_lease()", lock.lock_with_lease(lease))
                .await
                .map(drop),
        ),
        (
            "try_lock()",
            bounded("try_lock()", lock.try_lock()).await.map(drop),
        ),
        (
            "try_lock_for()",
            bounded("try_lock_for()", lock.try_lock_for(wait))
                .await
                .map(drop),
        ),
        (
            "try_lock_with()",
            bounded("try_lock_with()", lock.try_lock_with(wait, lease))
                .await
                .map(drop),
        ),
    ]
}

/// Every read method of `lock` and `force_unlock`, each called once, and what it
/// returned, values dropped.
pub async fn every_read<K: redis_rlock::LockKind>(
    lock: &redis_rlock::Lock<K>,
) -> Vec<(&'static str, redis_rlock::Result<()>)> {
    vec![
        (
            "force_unlock()",
            bounded("force_unlock()", lock.force_unlock())
                .await
                .map(drop),
        ),
        (
            "is_locked()",
            bounded("is_locked()", lock.is_locked()).await.map(drop),
        ),
        (
            "is_held_by_current_task()",
            bounded("is_held_by_current_task()", lock.is_held_by_current_task())
                .await
                .map(drop),
        ),
        (
            "hold_count()",
            bounded("hold_count()", lock.hold_count()).await.map(drop),
        ),
        (
            "remaining_ttl()",
            bounded("remaining_ttl()", lock.remaining_ttl())
                .await
                .map(drop),
        ),
    ]
}
