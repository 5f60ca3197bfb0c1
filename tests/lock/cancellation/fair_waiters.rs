//! What a cancelled fair waiter hands on: it leaves the queue at once, and a head that
//! leaves as the lock frees passes the lock to the waiter behind it.

use std::time::{Duration, Instant};

use testkit::fair::{fair_clients, queue_holder, queue_len};
use testkit::{queue_becomes, RedisServer};

use super::NO_HEARTBEAT;

#[tokio::test]
async fn a_cancelled_waiter_leaves_at_once_and_the_next_gets_the_lock() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let [holder_client, a, b] = fair_clients(&server, NO_HEARTBEAT).await;
    let holder = holder_client.fair_lock("cancel").lock().await.unwrap();
    let first = queue_holder(&a, &raw, "cancel").await;
    let second = queue_holder(&b, &raw, "cancel").await;

    let cancelled = Instant::now();
    first.task.abort();
    queue_becomes(
        &raw,
        "cancel",
        &[second.owner.as_str()],
        Duration::from_secs(1),
    )
    .await;
    assert!(cancelled.elapsed() < Duration::from_secs(1));
    assert_eq!(queue_len(&raw, "cancel").await, (1, 1));
    assert_eq!(a.status().queued_waiters, 0);
    assert_eq!(a.status().subscribed_channels, 0);

    let released = Instant::now();
    holder.unlock().await.unwrap();
    let (acquired, guard) = tokio::time::timeout(Duration::from_secs(1), second.task)
        .await
        .expect("the next waiter got the lock within a second of the release")
        .unwrap();
    assert!(acquired - released < Duration::from_secs(1));
    assert!(guard.owner().starts_with(&b.id().to_string()));
    guard.unlock().await.unwrap();
    assert_eq!(queue_len(&raw, "cancel").await, (0, 0));
}

#[tokio::test]
async fn a_head_that_leaves_as_the_lock_frees_passes_it_on() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let [holder_client, a, b] = fair_clients(&server, NO_HEARTBEAT).await;
    let holder = holder_client.fair_lock("pass-on").lock().await.unwrap();
    let head = queue_holder(&a, &raw, "pass-on").await;
    let next = queue_holder(&b, &raw, "pass-on").await;

    // The lock frees without a word to the head (deleted behind the library's back); the
    // head gives up before it looks again: its leaving must tell the next waiter.
    let _: i64 = redis::cmd("DEL")
        .arg("pass-on")
        .query_async(&mut raw)
        .await
        .unwrap();
    head.task.abort();
    let (_, guard) = tokio::time::timeout(Duration::from_secs(1), next.task)
        .await
        .expect("the waiter behind a leaving head got the free lock")
        .unwrap();
    assert!(guard.owner().starts_with(&b.id().to_string()));
    guard.unlock().await.unwrap();
    assert!(holder.unlock().await.unwrap_err().is_lock_lost());
}
