//! A lock's other keys of the wrong type (a fair lock's queue or timeout key, a fenced lock's
//! counter) refused with nothing written; a held lock overwritten with a string: its unlock
//! fails and keeps the string, and the guard is lost.

use std::time::Duration;

use testkit::{bounded, client, RedisServer};

use super::{expect_not_a_lock, get, plant, set, snapshot, Foreign};

#[tokio::test]
async fn fair_lock_refuses_a_queue_key_that_is_a_string_and_writes_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let queue = "redisson_lock_queue:{jobs}";
    set(&mut raw, queue, "not a queue").await;
    let lock = client.fair_lock("jobs");
    for (call, result) in [
        ("lock()", bounded("lock()", lock.lock()).await.map(drop)),
        (
            "try_lock()",
            bounded("try_lock()", lock.try_lock()).await.map(drop),
        ),
        (
            "try_lock_for()",
            bounded(
                "try_lock_for()",
                lock.try_lock_for(Duration::from_millis(300)),
            )
            .await
            .map(drop),
        ),
    ] {
        let err = expect_not_a_lock(call, result);
        assert!(err.to_string().contains(queue), "{call}: {err}");
    }
    assert_eq!(get(&mut raw, queue).await.as_deref(), Some("not a queue"));
    assert!(
        !testkit::key_exists(&mut raw, "jobs").await,
        "the lock was written"
    );
    assert_eq!(testkit::dbsize(&mut raw).await, 1, "keys written");
}

#[tokio::test]
async fn fair_lock_refuses_a_timeout_key_that_is_a_hash_and_writes_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let timeouts = "redisson_lock_timeout:{jobs}";
    plant(&mut raw, Foreign::UserHash, timeouts).await;
    let before = snapshot(&mut raw, timeouts).await;
    let lock = client.fair_lock("jobs");
    for (call, result) in [
        ("lock()", bounded("lock()", lock.lock()).await.map(drop)),
        (
            "try_lock()",
            bounded("try_lock()", lock.try_lock()).await.map(drop),
        ),
    ] {
        let err = expect_not_a_lock(call, result);
        assert!(err.to_string().contains(timeouts), "{call}: {err}");
    }
    assert_eq!(before, snapshot(&mut raw, timeouts).await);
    assert!(
        !testkit::key_exists(&mut raw, "jobs").await,
        "the lock was written"
    );
    assert_eq!(testkit::dbsize(&mut raw).await, 1, "keys written");
}

#[tokio::test]
async fn fenced_lock_with_a_non_numeric_counter_fails_without_writing_the_lock() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let counter = "redisson_lock_token:{ledger}";
    set(&mut raw, counter, "abc").await;
    let lock = client.fenced_lock("ledger");
    for (call, result) in [
        (
            "try_lock()",
            bounded("try_lock()", lock.try_lock()).await.map(drop),
        ),
        ("lock()", bounded("lock()", lock.lock()).await.map(drop)),
        (
            "lock_with_lease()",
            bounded(
                "lock_with_lease()",
                lock.lock_with_lease(Duration::from_secs(10)),
            )
            .await
            .map(drop),
        ),
    ] {
        let err = result.expect_err(call);
        assert!(!err.is_invalid_argument(), "{call}: {err}");
        assert!(
            !testkit::key_exists(&mut raw, "ledger").await,
            "{call}: half an acquire"
        );
    }
    assert_eq!(get(&mut raw, counter).await.as_deref(), Some("abc"));
    assert_eq!(client.status().held_locks, 0);
}

#[tokio::test]
async fn fenced_lock_refuses_a_counter_that_is_a_hash_and_writes_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let counter = "redisson_lock_token:{ledger}";
    plant(&mut raw, Foreign::UserHash, counter).await;
    let before = snapshot(&mut raw, counter).await;
    let lock = client.fenced_lock("ledger");
    for (call, result) in [
        (
            "try_lock()",
            bounded("try_lock()", lock.try_lock()).await.map(drop),
        ),
        ("lock()", bounded("lock()", lock.lock()).await.map(drop)),
    ] {
        let err = expect_not_a_lock(call, result);
        assert!(err.to_string().contains(counter), "{call}: {err}");
    }
    assert_eq!(before, snapshot(&mut raw, counter).await);
    assert!(
        !testkit::key_exists(&mut raw, "ledger").await,
        "half an acquire"
    );
    assert_eq!(testkit::dbsize(&mut raw).await, 1, "keys written");
}

#[tokio::test]
async fn unlocking_a_lock_overwritten_with_a_string_fails_and_keeps_the_string() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let lock = client.lock("overwritten");
    // A fixed lease: no watchdog renewal to notice the change first.
    let guard = lock.lock_with_lease(Duration::from_secs(30)).await.unwrap();
    let lost = guard.lost();
    set(&mut raw, "overwritten", "someone else's data").await;
    let err = expect_not_a_lock("unlock", bounded("unlock", guard.unlock()).await);
    assert!(err.to_string().contains("overwritten"), "{err}");
    assert_eq!(
        get(&mut raw, "overwritten").await.as_deref(),
        Some("someone else's data")
    );
    // The lock is gone: the `lost()` future taken while it was held must say so.
    let reason = tokio::time::timeout(Duration::from_secs(2), lost)
        .await
        .expect("lost() still pending 2 s after unlock() found the lock overwritten");
    assert_eq!(reason, redis_rlock::LostReason::Released);
}

#[tokio::test]
async fn unlocking_a_fair_or_fenced_lock_overwritten_with_a_string_fails_and_keeps_it() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    for (kind, guard) in [
        (
            "FairLock",
            client
                .fair_lock("fair")
                .lock_with_lease(Duration::from_secs(30))
                .await
                .unwrap(),
        ),
        (
            "FencedLock",
            client
                .fenced_lock("fenced")
                .lock_with_lease(Duration::from_secs(30))
                .await
                .unwrap(),
        ),
    ] {
        let key = guard.key().to_string();
        let lost = guard.lost();
        set(&mut raw, &key, "someone else's data").await;
        expect_not_a_lock(kind, bounded(kind, guard.unlock()).await);
        assert_eq!(
            get(&mut raw, &key).await.as_deref(),
            Some("someone else's data"),
            "{kind}"
        );
        tokio::time::timeout(Duration::from_secs(2), lost)
            .await
            .unwrap_or_else(|_| {
                panic!("{kind}: lost() still pending 2 s after unlock() found the lock overwritten")
            });
    }
}
