//! Code written once over `DistributedLock` and `DistributedGuard` runs with a single lock,
//! a RedLock and a MultiLock alike, against real servers; and what a client reports of
//! itself (`Client::status`, `LockGuard::key`) matches what Redis holds.

use std::time::Duration;

use redis::AsyncCommands;
use redis_rlock::{Client, DistributedGuard, DistributedLock, MultiLock, RedLock};
use testkit::{bounded, RedisGroup, RedisServer};

/// Takes `lock`, checks the guard is live, and releases it; returns whether a second try
/// while it was held found it busy.
async fn take_and_release(lock: &impl DistributedLock) -> bool {
    let guard = bounded("lock()", lock.lock()).await.unwrap();
    assert!(!guard.is_lost());
    assert!(guard.valid_until() > std::time::Instant::now());
    let rival = lock.clone();
    let busy = tokio::spawn(async move {
        rival
            .try_lock_for(Duration::from_millis(50))
            .await
            .unwrap()
            .is_none()
    });
    let busy = bounded("rival try", busy).await.unwrap();
    bounded("unlock()", guard.unlock()).await.unwrap();
    busy
}

#[tokio::test]
async fn one_generic_function_takes_a_single_lock_a_redlock_and_a_multilock() {
    let masters = RedisGroup::start(3);
    let mut clients = Vec::new();
    for url in masters.urls() {
        clients.push(Client::connect(url).await.unwrap());
    }
    assert!(take_and_release(&clients[0].lock("generic")).await);
    let redlock = RedLock::new(clients.iter().map(|c| c.lock("generic")).collect());
    assert!(take_and_release(&redlock).await);
    let multi = MultiLock::new(vec![clients[0].lock("a"), clients[0].lock("b")]);
    assert!(take_and_release(&multi).await);
    for (server, client) in masters.servers.iter().zip(&clients) {
        let keys = testkit::keys_but_latches(&server.raw().await).await;
        assert!(keys.is_empty(), "nothing held: {keys:?}");
        assert_eq!(client.status().held_locks, 0);
    }
}

#[tokio::test]
async fn status_and_the_guard_key_say_what_redis_holds() {
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .key_prefix("app:")
        .build()
        .await
        .unwrap();
    let watched = client.lock("watched").lock().await.unwrap();
    let leased = client
        .lock("leased")
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(watched.key(), "app:watched");
    let mut raw = server.raw().await;
    let field: Option<String> = raw.hget(watched.key(), watched.owner()).await.unwrap();
    assert_eq!(
        field.as_deref(),
        Some("1"),
        "the key names the hash in Redis"
    );
    let status = client.status();
    assert_eq!(status.held_locks, 2);
    assert_eq!(
        status.watchdog_holds, 1,
        "the fixed lease is not the watchdog's"
    );
    assert!(status.watchdog_running);
    assert_eq!(status.queued_waiters, 0);
    watched.unlock().await.unwrap();
    leased.unlock().await.unwrap();
    let status = client.status();
    assert_eq!((status.held_locks, status.watchdog_holds), (0, 0));
}
