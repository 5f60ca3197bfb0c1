//! FairLock waiters that give up: a `try_lock_for` that runs out leaves the queue before it
//! returns and `try_lock` never queues nor jumps the queue; two waits of one task share one
//! place, kept while either still waits; on a frozen server a queued wait still ends by its
//! own bound. (Waits cancelled by their caller: `tests/lock/cancellation/`.)

use std::time::{Duration, Instant};

use redis_rlock::Client;
use testkit::fair::{fair_clients, queue_holder, queue_len, queue_up};
use testkit::{fair_client, fair_queue, RedisServer};

const GENEROUS: Duration = Duration::from_secs(5);
/// Long enough that no heartbeat runs during a test: what happens is the scripts' doing.
const NO_HEARTBEAT: Duration = Duration::from_secs(120);

#[tokio::test]
async fn try_lock_variants_leave_the_queue_and_never_jump_it() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let [holder_client, other, queued] = fair_clients(&server, NO_HEARTBEAT).await;
    let holder = holder_client.fair_lock("try").lock().await.unwrap();
    let lock = other.fair_lock("try");

    let started = Instant::now();
    assert!(lock
        .try_lock_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(290),
        "gave up early: {waited:?}"
    );
    assert!(
        waited < Duration::from_millis(1_500),
        "gave up late: {waited:?}"
    );
    // Already out of the queue when the call returns.
    assert_eq!(queue_len(&raw, "try").await, (0, 0));
    assert_eq!(other.status().queued_waiters, 0);

    assert!(lock.try_lock().await.unwrap().is_none());
    assert_eq!(
        queue_len(&raw, "try").await,
        (0, 0),
        "try_lock never queues"
    );

    // A free lock with a waiter at the head of the queue belongs to that waiter: try_lock
    // does not take it, and its look tells the head, which takes it at once.
    let head = queue_holder(&queued, &raw, "try").await;
    let _: i64 = redis::cmd("DEL")
        .arg("try")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(lock.try_lock().await.unwrap().is_none());
    let (_, guard) = tokio::time::timeout(Duration::from_secs(1), head.task)
        .await
        .expect("the head was told the lock is free")
        .unwrap();
    guard.unlock().await.unwrap();

    // Nobody queued: try_lock takes the lock with one script call.
    let got = lock.try_lock().await.unwrap().expect("free, nobody queued");
    got.unlock().await.unwrap();
    drop(holder);
}

#[tokio::test]
async fn two_waits_of_one_task_share_one_place() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let [holder_client, client, other] = fair_clients(&server, NO_HEARTBEAT).await;
    let holder = holder_client.fair_lock("two-waits").lock().await.unwrap();
    let (gave_up_tx, gave_up_rx) = tokio::sync::oneshot::channel();
    let both = queue_up(&client, &raw, "two-waits", |lock| async move {
        let (got, ()) = tokio::join!(lock.lock(), async {
            let gave_up = lock.try_lock_for(Duration::from_millis(300)).await;
            let _ = gave_up_tx.send(gave_up.unwrap().is_none());
        });
        got.unwrap()
    })
    .await;
    let behind = queue_holder(&other, &raw, "two-waits").await;

    assert!(gave_up_rx.await.unwrap(), "the short wait gave up");
    // The task's other wait still wants its place: it is still at the head.
    assert_eq!(
        fair_queue(&mut raw, "two-waits").await,
        [both.owner.as_str(), behind.owner.as_str()]
    );
    holder.unlock().await.unwrap();
    let guard = both.finish_within(GENEROUS).await;
    assert!(!behind.task.is_finished());
    guard.unlock().await.unwrap();
    let (_, guard) = behind.finish_within(GENEROUS).await;
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn fair_calls_on_a_frozen_server_end_in_bounded_time() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let holder_client = fair_client(&server, Duration::from_secs(5)).await;
    // Each try on a frozen server costs at most a reconnect and a reply: 0.8 s.
    let client = Client::builder(server.url())
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_millis(300))
        .retry_delay(Duration::from_millis(20))
        .build()
        .await
        .unwrap();
    let holder = holder_client.fair_lock("ice").lock().await.unwrap();
    let waiter = queue_up(&client, &raw, "ice", |lock| async move {
        lock.try_lock_for(Duration::from_secs(2)).await
    })
    .await;

    // Frozen while a waiter is queued: its wait still ends, by its own bound.
    server.freeze();
    let frozen = Instant::now();
    let outcome = waiter.finish_within(Duration::from_secs(10)).await;
    assert!(
        matches!(&outcome, Ok(None)) || outcome.as_ref().is_err_and(|e| e.is_connection_error()),
        "{outcome:?}"
    );
    assert!(
        frozen.elapsed() < Duration::from_secs(5),
        "{:?}",
        frozen.elapsed()
    );

    // A new waiting call on the frozen server fails within its retries.
    let started = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(10), client.fair_lock("ice").lock())
        .await
        .expect("bounded")
        .unwrap_err();
    assert!(err.is_connection_error(), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    server.thaw();
    drop(holder);
}
