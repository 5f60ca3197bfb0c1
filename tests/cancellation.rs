//! Cancellation: a lock call whose future is dropped (a `timeout` around it, a `select!`,
//! an aborted task) leaves nothing behind: no lock held in Redis, no place in a fair
//! lock's queue, no subscription.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use testkit::fair::{fair_clients, queue_holder, queue_len};
use testkit::group::{clients, held_on, redlock};
use testkit::{client, eventually, queue_becomes, settles_to, RedisGroup, RedisServer};
use tokio::sync::Barrier;

const GENEROUS: Duration = Duration::from_secs(5);
/// Long enough that no heartbeat runs during a test: what happens is the scripts' doing.
const NO_HEARTBEAT: Duration = Duration::from_secs(120);
const TASKS: usize = 64;

async fn keys_matching(conn: &mut redis::aio::MultiplexedConnection, pattern: &str) -> usize {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(pattern)
        .query_async(conn)
        .await
        .unwrap();
    keys.len()
}

#[tokio::test]
async fn a_cancelled_wait_leaves_no_subscription_and_no_lock() {
    let server = RedisServer::start();
    let (holder, waiter_client) = (client(&server).await, client(&server).await);
    let guard = holder.lock("cancel").lock().await.unwrap();
    let lock = waiter_client.lock("cancel");

    let waited = tokio::time::timeout(Duration::from_millis(200), lock.lock()).await;
    assert!(waited.is_err(), "still held: the wait was cancelled");
    assert_eq!(waiter_client.status().subscribed_channels, 0);
    let channel = "redisson_lock__channel:{cancel}";
    eventually("Redis dropped the subscription", GENEROUS, || {
        server.cli(&["PUBSUB", "NUMSUB", channel]) == format!("{channel}\n0")
    })
    .await;
    guard.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn lock_calls_cancelled_at_any_point_never_leave_the_lock_held() {
    let server = RedisServer::start();
    let (holder, client) = (client(&server).await, client(&server).await);
    let lock = client.lock("racy");
    // Cancel after every delay from 0 to ~3 ms, both on a free lock and while another
    // client holds it and releases it: some calls are dropped with their script in flight.
    for round in 0..60u64 {
        let held = if round % 2 == 0 {
            Some(holder.lock("racy").lock().await.unwrap())
        } else {
            None
        };
        let cancel_after = Duration::from_micros(round * 50);
        let releaser = held.map(|guard| tokio::spawn(async move { guard.unlock().await }));
        if let Ok(guard) = tokio::time::timeout(cancel_after, lock.lock()).await {
            guard.unwrap().unlock().await.unwrap();
        }
        if let Some(releaser) = releaser {
            releaser.await.unwrap().unwrap();
        }
    }
    // Anything a cancelled call took is released in the background right away; the lease
    // (30 s) would be far slower.
    let lock_free = {
        let lock = lock.clone();
        async move {
            while lock.is_locked().await.unwrap() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(3), lock_free)
        .await
        .expect("no cancelled call left the lock held");
    assert_eq!(client.status().subscribed_channels, 0);
}

#[tokio::test]
async fn a_call_abandoned_while_redis_is_frozen_leaves_no_lock_once_it_thaws() {
    let server = RedisServer::start();
    let client = redis_rlock::Client::builder(server.url())
        .response_timeout(Duration::from_millis(400))
        .retry_delay(Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    let lock = client.lock("frozen-cancel");
    server.freeze();
    // The caller gives up before the command's own timeout; Redis runs it when it thaws.
    let gave_up = tokio::time::timeout(Duration::from_millis(100), lock.lock()).await;
    assert!(gave_up.is_err());
    tokio::time::sleep(Duration::from_millis(600)).await; // the abandoned call times out
    server.thaw();
    let raw = server.raw().await;
    let ttl = testkit::settles_to(-2, Duration::from_secs(3), || {
        let mut raw = raw.clone();
        async move { testkit::pttl(&mut raw, "frozen-cancel").await }
    })
    .await;
    assert_eq!(
        ttl, -2,
        "the abandoned acquire was undone, not left for its 30 s lease"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_abandoned_in_a_batch_leave_nothing_held() {
    let server = RedisServer::start();
    let mut conn = server.raw().await;
    let client = client(&server).await;
    for round in 0..6u64 {
        let start = Arc::new(Barrier::new(TASKS));
        let tasks: Vec<_> = (0..TASKS as u64)
            .map(|i| {
                let (lock, start) = (client.lock(format!("left:{round}:{i}")), start.clone());
                // From before the first reply to after the last, across the tasks.
                let patience = Duration::from_micros((i * 37 + round * 101) % 1_500);
                tokio::spawn(async move {
                    start.wait().await;
                    // A 60 s lease: a lock left behind would outlive the test's wait.
                    tokio::time::timeout(patience, lock.lock_with_lease(Duration::from_secs(60)))
                        .await
                        .ok()
                        .map(Result::unwrap)
                })
            })
            .collect();
        // Guards that were returned are dropped here: released in the background too.
        drop(join_all(tasks).await);
    }
    let left = settles_to(0, Duration::from_secs(10), || {
        let mut conn = conn.clone();
        async move { keys_matching(&mut conn, "left:*").await }
    })
    .await;
    assert_eq!(left, 0, "locks left held by abandoned acquires");
    let _ = &mut conn;
}

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

#[tokio::test]
async fn group_calls_cancelled_at_any_point_never_leave_a_lock_held() {
    let group = RedisGroup::start(5);
    let (a, b) = (
        clients(&group, Duration::from_secs(30)).await,
        clients(&group, Duration::from_secs(30)).await,
    );
    let (lock, rival) = (redlock(&a, "racy"), redlock(&b, "racy"));
    // Cancel after every delay from 0 to ~3 ms (a round is ~0.5 ms here), on a free lock
    // and while a rival holds it and releases it: calls are dropped in the fan-out, with
    // stragglers out, in the rollback and in the wait.
    for round in 0..150u64 {
        let held = if round % 2 == 0 {
            Some(rival.lock().await.unwrap())
        } else {
            None
        };
        let releaser = held.map(|guard| tokio::spawn(async move { guard.unlock().await }));
        let cancel_after = Duration::from_micros(round * 20);
        if let Ok(guard) = tokio::time::timeout(cancel_after, lock.lock()).await {
            guard.unwrap().unlock().await.unwrap();
        }
        if let Some(releaser) = releaser {
            releaser.await.unwrap().unwrap();
        }
    }
    // Anything a cancelled call took is released in the background right away; the lease
    // (30 s) would be far slower.
    let expected = [false; 5];
    assert_eq!(held_on(&group, "racy", &expected).await, expected);
    for client in &a {
        assert_eq!(client.status().subscribed_channels, 0);
    }
}
