//! MultiLock: all or nothing. It rolls back while one of its locks is held elsewhere,
//! waits holding none of them, is woken by that lock's unlock, and is lost when any of its
//! locks is.

use std::time::Duration;

use redis_rlock::{LostReason, MultiLock};
use testkit::group::NODE_TIMEOUT;
use testkit::{client_with_watchdog, lock_hash, settles_to, RedisGroup, RedisServer, Waiting};

const GENEROUS: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_multilock_rolls_back_while_one_lock_is_held_elsewhere() {
    let group = RedisGroup::start(2);
    let (one, two) = (
        testkit::client(&group.servers[0]).await,
        testkit::client(&group.servers[1]).await,
    );
    let other = testkit::client(&group.servers[1]).await;
    let multi = MultiLock::new(vec![one.lock("a"), two.lock("b"), one.lock("c")])
        .with_node_timeout(NODE_TIMEOUT);
    assert_eq!(multi.quorum(), 3);
    let blocker = other.lock("b").lock().await.unwrap();

    assert!(multi
        .try_lock_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    let (mut first, mut second) = (group.servers[0].raw().await, group.servers[1].raw().await);
    assert!(lock_hash(&mut first, "a").await.is_empty());
    assert!(lock_hash(&mut first, "c").await.is_empty());

    let waiting = multi.clone();
    // It listens where only an unlock can let it in: b's master. (Which other locks answer
    // before b is decided in a round depends on timing; it never needs their unlocks.)
    let waiter = Waiting::listening(&two, 1, async move { waiting.lock().await.unwrap() }).await;
    // Waiting, it holds none of its locks (its last round may still be rolling back).
    for key in ["a", "c"] {
        let held = settles_to(false, GENEROUS, || {
            let mut raw = first.clone();
            async move { !lock_hash(&mut raw, key).await.is_empty() }
        })
        .await;
        assert!(!held, "{key} held while waiting");
    }

    let woken = waiter
        .woken_by(async { blocker.unlock().await.unwrap() })
        .await;
    assert!(
        woken.after < Duration::from_millis(500),
        "woken by b's unlock"
    );
    let guard = woken.value;
    assert_eq!(guard.held_on(), 3);
    for (conn, key) in [(&first, "a"), (&second, "b"), (&first, "c")] {
        let hash = lock_hash(&mut conn.clone(), key).await;
        assert_eq!(hash.get(guard.owner()), Some(&1), "{key}: {hash:?}");
    }
    guard.unlock().await.unwrap();
    assert!(lock_hash(&mut second, "b").await.is_empty());
}

#[tokio::test]
async fn a_multilock_is_lost_when_any_lock_is() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_secs(1)).await;
    let multi = MultiLock::new(vec![client.lock("x"), client.lock("y")]);
    let guard = multi.lock().await.unwrap();
    let lost = guard.lost();
    assert!(client.lock("y").force_unlock().await.unwrap());
    let reason = tokio::time::timeout(GENEROUS, lost).await.unwrap();
    assert_eq!(reason, LostReason::Released);
    let err = guard.unlock().await.unwrap_err();
    assert_eq!(err.lost_reason(), Some(LostReason::Released));
    assert!(!client.lock("x").is_locked().await.unwrap());
}
