//! Lock groups refuse input they cannot honour before anything is sent: no locks, an empty
//! name, a zero node timeout or lease, a lease too short to use after the node timeout, the
//! same lock twice, and two locks of one master in a RedLock.

use std::time::Duration;

use redis_rlock::{MultiLock, RedLock};
use testkit::group::{clients, redlock};
use testkit::{client_with_watchdog, RedisGroup, RedisServer};

#[tokio::test]
async fn bad_group_input_is_refused_before_anything_is_sent() {
    let server = RedisServer::start();
    let client = testkit::client(&server).await;
    let empty = RedLock::new(Vec::<redis_rlock::RLock>::new());
    assert!(empty.lock().await.unwrap_err().is_invalid_argument());
    let unnamed = MultiLock::new(vec![client.lock("fine"), client.lock("")]);
    assert!(unnamed.try_lock().await.unwrap_err().is_invalid_argument());
    let lock = RedLock::new(vec![client.lock("fine")]);
    assert!(lock
        .clone()
        .with_node_timeout(Duration::ZERO)
        .lock()
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(lock
        .lock_with_lease(Duration::ZERO)
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(lock
        .try_lock_with(Duration::from_secs(1), Duration::MAX)
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert_eq!(
        testkit::dbsize(&mut server.raw().await).await,
        0,
        "nothing written"
    );
}

#[tokio::test]
async fn group_leases_too_short_to_use_and_shared_masters_are_refused() {
    let group = RedisGroup::start(3);
    let a = clients(&group, Duration::from_secs(30)).await;
    let lock = redlock(&a, "short").with_node_timeout(Duration::from_millis(100));
    for lease in [Duration::from_millis(2), Duration::from_millis(100)] {
        let err = lock.lock_with_lease(lease).await.unwrap_err();
        assert!(err.is_invalid_argument(), "{lease:?}: {err}");
    }
    assert!(lock
        .try_lock_with(Duration::ZERO, Duration::from_millis(300))
        .await
        .unwrap()
        .is_some());
    let twice = RedLock::new(vec![a[0].lock("k"), a[1].lock("k"), a[0].lock("k")]);
    assert!(twice.try_lock().await.unwrap_err().is_invalid_argument());
    let same_master = client_with_watchdog(&group.servers[0], Duration::from_secs(30)).await;
    let aliased = RedLock::new(vec![a[0].lock("k"), same_master.lock("k"), a[1].lock("k")]);
    assert!(aliased.try_lock().await.unwrap_err().is_invalid_argument());
}
