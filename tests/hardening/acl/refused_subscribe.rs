//! A refused `SUBSCRIBE` fails the wait at once: `lock()`, `try_lock_for()` and a fair wait
//! (which takes no place in the queue), without reconnecting in a loop and without hurting
//! the client's other waiters.

use std::time::{Duration, Instant};

use redis_rlock::Client;
use testkit::acl::{readme_rules, replacing};
use testkit::{RedisServer, Waiting};

use super::{assert_denied, refused, server_with_user, user_client, ALL_CHANNELS, OK_CHANNELS};

/// The user's client, and an admin client holding `app:bad` (whose channel the user may
/// not subscribe to) for 30 s.
async fn bad_lock_held_elsewhere(server: &RedisServer) -> (Client, Client, redis_rlock::LockGuard) {
    let admin = testkit::client(server).await;
    let held = admin
        .lock("app:bad")
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    (user_client(server).await, admin, held)
}

#[tokio::test]
async fn a_refused_subscribe_fails_lock_at_once() {
    let server = server_with_user(&replacing(
        &readme_rules("app:*"),
        ALL_CHANNELS,
        OK_CHANNELS,
    ));
    let (client, _admin, _held) = bad_lock_held_elsewhere(&server).await;

    let started = Instant::now();
    let error = refused(client.lock("app:bad").lock().await);
    let took = started.elapsed();
    assert_denied(&error, &["redisson_lock__channel:{app:bad}", ALL_CHANNELS]);
    assert!(took < Duration::from_secs(1), "refused after {took:?}");
}

#[tokio::test]
async fn a_refused_subscribe_fails_try_lock_for_at_once() {
    let server = server_with_user(&replacing(
        &readme_rules("app:*"),
        ALL_CHANNELS,
        OK_CHANNELS,
    ));
    let (client, _admin, _held) = bad_lock_held_elsewhere(&server).await;

    let started = Instant::now();
    let outcome = client
        .lock("app:bad")
        .try_lock_for(Duration::from_secs(3))
        .await;
    let took = started.elapsed();
    let error = match outcome {
        Err(e) => e,
        Ok(None) => panic!("Ok(None) after {took:?} instead of the refusal"),
        Ok(Some(_)) => panic!("taken while held elsewhere"),
    };
    assert_denied(&error, &["redisson_lock__channel:{app:bad}"]);
    assert!(took < Duration::from_secs(1), "refused after {took:?}");
}

/// A fair lock's waiter subscribes to its own channel before it queues: refused, it fails
/// at once and takes no place in the queue.
#[tokio::test]
async fn a_refused_subscribe_fails_a_fair_wait_at_once_without_queueing() {
    let server = server_with_user(&replacing(
        &readme_rules("app:*"),
        ALL_CHANNELS,
        OK_CHANNELS,
    ));
    let admin = testkit::client(&server).await;
    let _held = admin.fair_lock("app:bad").lock().await.unwrap();
    let client = user_client(&server).await;

    let started = Instant::now();
    let error = refused(client.fair_lock("app:bad").lock().await);
    let took = started.elapsed();
    assert_denied(&error, &["redisson_lock__channel:{app:bad}", ALL_CHANNELS]);
    assert!(took < Duration::from_secs(1), "refused after {took:?}");
    let queue = testkit::fair_queue(&mut server.raw().await, "app:bad").await;
    assert!(queue.is_empty(), "queued: {queue:?}");
}

/// The refused channel is the channel's problem, not the connection's: the pub/sub
/// connection is kept rather than reopened (and refused again) in a loop.
#[tokio::test]
async fn a_refused_subscribe_does_not_reconnect_in_a_loop() {
    let server = server_with_user(&replacing(
        &readme_rules("app:*"),
        ALL_CHANNELS,
        OK_CHANNELS,
    ));
    let (client, _admin, _held) = bad_lock_held_elsewhere(&server).await;

    let connections = || testkit::info_field(&server, "stats", "total_connections_received", "");
    let before = connections();
    refused(client.lock("app:bad").lock().await);
    // No event marks the absence of reconnections: watch for a while (a loop would open
    // about ten a second).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let opened = connections() - before;
    assert!(
        opened <= 3,
        "{opened} connections opened in the second after the refusal"
    );
}

#[tokio::test]
async fn a_refused_subscribe_leaves_the_other_waiters_of_the_client_served() {
    let server = server_with_user(&replacing(
        &readme_rules("app:*"),
        ALL_CHANNELS,
        OK_CHANNELS,
    ));
    let (client, admin, _held) = bad_lock_held_elsewhere(&server).await;
    let ok_held = admin
        .lock("app:ok1")
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();

    // At the same time: both channels may go out in one SUBSCRIBE.
    let (ok_lock, bad_lock) = (client.lock("app:ok1"), client.lock("app:bad"));
    let ok_waiting = Waiting::spawn(async move { ok_lock.lock().await.unwrap() });
    let bad_waiting = tokio::spawn(async move { bad_lock.lock().await });
    let error = refused(bad_waiting.await.unwrap());
    assert_denied(&error, &["redisson_lock__channel:{app:bad}"]);

    testkit::eventually(
        "the permitted waiter subscribed",
        Duration::from_secs(5),
        || client.status().subscribed_channels == 1,
    )
    .await;
    let woken = ok_waiting
        .woken_by(async { ok_held.unlock().await.unwrap() })
        .await;
    let woken_after = woken.after;
    assert!(
        woken_after < Duration::from_secs(2),
        "the permitted waiter took {woken_after:?}: not woken by the unlock message"
    );
    woken.value.unlock().await.unwrap();
}
