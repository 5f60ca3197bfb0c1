//! Replica sync: with `replica_sync` on, a lock write counts only once a replica has it; a
//! replica that stops acknowledging makes acquires fail with nothing left on the master and
//! renewals stop counting, while a master with no replica connected is not held up.

use std::time::{Duration, Instant};

use redis_rlock::{Client, LostReason};
use testkit::{lock_hash, pttl, settles_to, start_replica_of, RedisServer};

const GENEROUS: Duration = Duration::from_secs(5);
/// Roomy on a loaded 2-core machine, where a healthy replica acknowledges in about 1 ms.
const SYNC_TIMEOUT: Duration = Duration::from_millis(500);

async fn synced_client(master: &RedisServer, watchdog: Duration) -> Client {
    Client::builder(master.url())
        .replica_sync(1, SYNC_TIMEOUT)
        .watchdog_timeout(watchdog)
        .retry_attempts(2)
        .retry_delay(Duration::from_millis(20))
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_lock_is_on_the_replica_by_the_time_lock_returns() {
    let master = RedisServer::start();
    let replica = start_replica_of(&master).await;
    let client = synced_client(&master, Duration::from_secs(30)).await;
    let mut on_replica = replica.raw().await;
    for i in 0..20 {
        let name = format!("synced:{i}");
        let guard = client.lock(&name).lock().await.unwrap();
        // Read at once from the replica: WAIT made sure it has the write.
        let hash = lock_hash(&mut on_replica, &name).await;
        assert_eq!(hash.get(guard.owner()), Some(&1), "{name} on the replica");
        guard.unlock().await.unwrap();
    }
}

#[tokio::test]
async fn a_frozen_replica_makes_acquires_fail_with_nothing_left_on_the_master() {
    let master = RedisServer::start();
    let replica = start_replica_of(&master).await;
    let client = synced_client(&master, Duration::from_secs(30)).await;
    let unsynced = testkit::client(&master).await;
    let mut raw = master.raw().await;

    // Still connected, never acknowledging: what a replica stuck in a long pause looks like.
    replica.freeze();
    let started = Instant::now();
    let err = client
        .lock("frozen")
        .try_lock_for(Duration::from_secs(10))
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(err.is_not_replicated(), "{err}");
    assert!(err.is_connection_error());
    assert!(
        matches!(err, redis_rlock::Error::NotReplicated { connected: 1, timeout } if timeout == SYNC_TIMEOUT),
        "{err:?}"
    );
    // Two attempts of one WAIT timeout each, and the pauses between: bounded, not hung.
    assert!(took < Duration::from_secs(3), "gave up after {took:?}");
    // Rolled back on the master: nobody holds it.
    assert_eq!(pttl(&mut raw, "frozen").await, -2);
    assert!(!unsynced.lock("frozen").is_locked().await.unwrap());
    // Without replica sync the same acquire succeeds: the failure is the sync's doing.
    let guard = unsynced.lock("frozen").try_lock().await.unwrap().unwrap();
    guard.unlock().await.unwrap();

    // Once the replica is back, synced acquires work again, and reach it.
    replica.thaw();
    let guard = client.lock("frozen").lock().await.unwrap();
    let hash = lock_hash(&mut replica.raw().await, "frozen").await;
    assert_eq!(hash.get(guard.owner()), Some(&1));
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn renewals_no_replica_acknowledges_do_not_keep_the_lock_valid() {
    let master = RedisServer::start();
    let replica = start_replica_of(&master).await;
    let client = synced_client(&master, Duration::from_millis(900)).await;
    let guard = client.lock("renewed").lock().await.unwrap();
    replica.freeze();
    // The master still renews the key, but no renewal counts: the guard's validity runs
    // out with the lease taken before the freeze.
    let started = Instant::now();
    let reason = tokio::time::timeout(GENEROUS, guard.lost()).await.unwrap();
    assert_eq!(reason, LostReason::ConnectionLost);
    assert!(started.elapsed() < Duration::from_millis(1500));
    replica.thaw();
    let err = guard.unlock().await.unwrap_err();
    assert_eq!(err.lost_reason(), Some(LostReason::ConnectionLost));
}

#[tokio::test]
async fn with_no_replica_connected_writes_are_not_held_up() {
    let master = RedisServer::start();
    let mut replica = start_replica_of(&master).await;
    let client = synced_client(&master, Duration::from_secs(30)).await;
    replica.kill();
    let gone = settles_to(0, GENEROUS, || async {
        testkit::info_field(&master, "replication", "connected_slaves", "")
    })
    .await;
    assert_eq!(gone, 0);
    // The first write may find the reading of connected replicas stale and wait once;
    // after that, no WAIT is sent at all.
    let guard = client.lock("alone").lock().await.unwrap();
    guard.unlock().await.unwrap();
    let started = Instant::now();
    for _ in 0..10 {
        let guard = client.lock("alone").lock().await.unwrap();
        guard.unlock().await.unwrap();
    }
    let took = started.elapsed();
    assert!(
        took < SYNC_TIMEOUT * 3,
        "10 lock + unlock took {took:?} with no replica"
    );
}

#[tokio::test]
async fn replica_sync_settings_are_checked() {
    let master = RedisServer::start();
    for (replicas, timeout) in [
        (0, Duration::from_millis(100)),
        (1, Duration::ZERO),
        (1, Duration::from_secs(1)),
        (1, Duration::from_secs(5)),
    ] {
        let err = Client::builder(master.url())
            .replica_sync(replicas, timeout)
            .build()
            .await
            .unwrap_err();
        assert!(err.is_invalid_argument(), "{replicas} {timeout:?}: {err}");
    }
}

#[tokio::test]
async fn nested_unlocks_no_replica_acknowledges_do_not_keep_the_lock_valid_either() {
    let master = RedisServer::start();
    let replica = start_replica_of(&master).await;
    let client = synced_client(&master, Duration::from_millis(900)).await;
    let lock = client.lock("nested");
    let outer = lock.lock().await.unwrap();
    let mut inner = Vec::new();
    for _ in 0..8 {
        inner.push(lock.lock().await.unwrap());
    }
    replica.freeze();
    let frozen = Instant::now();
    let lost = outer.lost();
    // Each nested unlock re-applies the lease on the master alone.
    for guard in inner {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let _ = guard.unlock().await;
    }
    let reason = tokio::time::timeout(GENEROUS, lost).await.unwrap();
    assert_eq!(reason, LostReason::ConnectionLost);
    let after = frozen.elapsed();
    assert!(
        after < Duration::from_millis(1400),
        "lost {after:?} after the replica froze, not kept valid by the nested unlocks"
    );
    replica.thaw();
}
