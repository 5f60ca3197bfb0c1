//! A FairLock whose deadlines key (`redisson_lock_timeout:{name}`) holds other data while
//! the lock is held: every acquire call refuses it, re-entry included, with nothing written;
//! a release with nobody queued touches only the lock, so it frees the lock and leaves the
//! key as it was; a release with waiters queued, which would purge and tell them through
//! that key, refuses it with the lock still held.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use testkit::{bounded, client, lock_hash, raw_get, RedisServer};

const LEASE: Duration = Duration::from_secs(30);

/// Plants a string at the deadlines key of fair lock `name`; returns that key.
async fn plant_string(raw: &mut MultiplexedConnection, name: &str) -> String {
    let timeouts = format!("redisson_lock_timeout:{{{name}}}");
    let _: () = redis::cmd("SET")
        .arg(&timeouts)
        .arg("user data")
        .query_async(raw)
        .await
        .unwrap();
    timeouts
}

fn expect_not_a_lock<T: std::fmt::Debug>(what: &str, key: &str, result: redis_rlock::Result<T>) {
    match result {
        Err(e) => {
            assert!(e.is_not_a_lock(), "{what}: {e} ({e:?})");
            assert!(e.to_string().contains(key), "{what}: {e}");
        }
        Ok(value) => panic!("{what}: a string at the deadlines key was accepted ({value:?})"),
    }
}

#[tokio::test]
async fn with_nobody_queued_acquires_refuse_it_and_releases_leave_it() {
    let server = RedisServer::start();
    let client = client(&server).await;
    // Another owner of the same name.
    let other = testkit::client(&server).await;
    let mut raw = server.raw().await;
    let lock = client.fair_lock("ledger");
    let outer = lock.lock_with_lease(LEASE).await.unwrap();
    let inner = lock.lock_with_lease(LEASE).await.unwrap();
    let timeouts = plant_string(&mut raw, "ledger").await;

    let reentry = bounded("re-entry", lock.lock_with_lease(LEASE)).await;
    expect_not_a_lock("re-entry", &timeouts, reentry.map(drop));
    let theirs = other.fair_lock("ledger");
    let tried = bounded("try_lock", theirs.try_lock()).await;
    expect_not_a_lock("another client's try_lock", &timeouts, tried.map(drop));
    let hash = lock_hash(&mut raw, "ledger").await;
    assert_eq!(hash.get(outer.owner()), Some(&2), "{hash:?}");
    assert_eq!(hash.len(), 1, "{hash:?}");

    bounded("inner unlock", inner.unlock()).await.unwrap();
    assert_eq!(
        lock_hash(&mut raw, "ledger").await.get(outer.owner()),
        Some(&1)
    );
    bounded("outer unlock", outer.unlock()).await.unwrap();
    assert!(!testkit::key_exists(&mut raw, "ledger").await, "still held");
    assert_eq!(
        raw_get(&mut raw, &timeouts).await.as_deref(),
        Some("user data")
    );
    assert_eq!(client.status().held_locks, 0);
}

#[tokio::test]
async fn with_a_waiter_queued_the_release_refuses_it_and_keeps_the_lock() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let lock = client.fair_lock("ledger");
    let guard = lock.lock_with_lease(LEASE).await.unwrap();
    let queue = "redisson_lock_queue:{ledger}";
    let _: () = redis::cmd("RPUSH")
        .arg(queue)
        .arg("7b0e2c3a-0000-4000-8000-000000000000:1")
        .query_async(&mut raw)
        .await
        .unwrap();
    let timeouts = plant_string(&mut raw, "ledger").await;

    let released = bounded("unlock", guard.unlock()).await;
    expect_not_a_lock("unlock with a waiter queued", &timeouts, released);
    assert_eq!(
        lock_hash(&mut raw, "ledger").await.len(),
        1,
        "the lock was freed"
    );
    assert_eq!(
        raw_get(&mut raw, &timeouts).await.as_deref(),
        Some("user data")
    );
    assert_eq!(testkit::fair_queue(&mut raw, "ledger").await.len(), 1);
}
